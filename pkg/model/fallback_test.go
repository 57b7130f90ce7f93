package model_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

func TestFallbackInterface_IsThePodNetworkNICNotBoundToUs(t *testing.T) {
	pod := ifaceSpec{name: "default", pod: true, mac: "02:00:00:00:00:0A"}
	podNoMAC := ifaceSpec{name: "default", pod: true}
	podOurs := ifaceSpec{name: "default", pod: true, binding: testBinding, mac: "02:00:00:00:00:0b"}
	absent := ifaceSpec{name: "default", pod: true, mac: "02:00:00:00:00:0c", absent: true}
	tests := []struct {
		name    string
		vmi     *model.VirtualMachineInstance
		want    string // "" = no fallback; "-" = fallback without MAC
		wantErr string
	}{
		{"masquerade pod NIC with MAC", newVMI(pod, bound("a", "sriov-a")), "02:00:00:00:00:0a", ""},
		{"pod NIC after ours", newVMI(bound("a", "sriov-a"), pod), "02:00:00:00:00:0a", ""},
		{"pod NIC without MAC", newVMI(podNoMAC, bound("a", "sriov-a")), "-", ""},
		{"pod NIC bound to us is ours, not a fallback", newVMI(podOurs), "", ""},
		{"hot-unplugged pod NIC", newVMI(absent, bound("a", "sriov-a")), "", ""},
		{"only secondary networks", newVMI(bound("a", "sriov-a")), "", ""},
		{"bad MAC", newVMI(ifaceSpec{name: "default", pod: true, mac: "zz"}), "", `invalid MAC "zz"`},
		{"nil VMI", nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fb, err := model.FallbackInterface(tc.vmi, testBinding)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			switch tc.want {
			case "":
				assert.Nil(t, fb)
			case "-":
				require.NotNil(t, fb)
				assert.Nil(t, fb.MAC)
				assert.True(t, fb.DHCP)
			default:
				require.NotNil(t, fb)
				assert.Equal(t, "default", fb.Name)
				assert.Equal(t, tc.want, fb.MAC.String())
				assert.True(t, fb.DHCP, "DHCPv4, as cloud-init's fallback")
				assert.Empty(t, fb.Addresses)
			}
		})
	}
}
