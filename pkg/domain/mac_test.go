package domain

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

const podNICDomain = `<domain type="kvm">
  <name>default_vm1</name>
  <devices>
    <interface type="ethernet">
      <source></source>
      <target dev="tap0" managed="no"></target>
      <model type="virtio-non-transitional"></model>%s
      <alias name="ua-default"></alias>
    </interface>
    <hostdev mode="subsystem" type="pci" managed="no"></hostdev>
  </devices>
</domain>`

func TestSetPodNICMAC(t *testing.T) {
	want := netval.MAC{0x0a, 0x58, 0x0a, 0x80, 0x00, 0x05}
	noMAC := strings.Replace(podNICDomain, "%s", "", 1)
	withMAC := strings.Replace(noMAC, `<source></source>`, `<source></source>`+"\n      "+`<mac address="02:00:00:00:00:09"></mac>`, 1)
	tests := []struct {
		name    string
		domain  string
		iface   string
		want    string // the expected domain; "" = unchanged
		wantRes PodNICMAC
		wantErr string
	}{
		{
			name:   "no MAC: ours goes in as the first child, indented like the others",
			domain: noMAC, iface: "default",
			want: strings.Replace(noMAC, `<interface type="ethernet">`+"\n      ",
				`<interface type="ethernet">`+"\n      "+`<mac address='0a:58:0a:80:00:05'/>`+"\n      ", 1),
			wantRes: PodNICMAC{Found: true, Set: true},
		},
		{name: "a MAC KubeVirt set is kept", domain: withMAC, iface: "default", wantRes: PodNICMAC{Found: true, Existing: "02:00:00:00:00:09"}},
		{name: "no such interface", domain: noMAC, iface: "other", wantRes: PodNICMAC{}},
		{name: "no devices", domain: `<domain><name>x</name></domain>`, iface: "default"},
		{name: "self-closing interface", domain: `<domain><devices><interface type="ethernet"/></devices></domain>`, iface: "default"},
		{name: "malformed", domain: `<domain><devices>`, iface: "default", wantErr: "not a single well-formed"},
		{name: "hostile name", domain: noMAC, iface: `x"/><evil`, wantErr: "interface name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, res, err := SetPodNICMAC([]byte(tc.domain), tc.iface, want)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantRes, res)
			expected := tc.want
			if expected == "" {
				expected = tc.domain
			}
			assert.Equal(t, expected, string(out))
			// Idempotent: a second call finds the MAC it set and changes nothing.
			again, res2, err := SetPodNICMAC(out, tc.iface, want)
			require.NoError(t, err)
			assert.Equal(t, string(out), string(again))
			assert.False(t, res2.Set)
		})
	}
}

func TestSetPodNICMAC_OtherSelfClosingInterfacesAreIgnored(t *testing.T) {
	_, _, err := SetPodNICMAC([]byte(`<domain><devices><interface type="ethernet"><alias name="ua-default"/></interface><interface type="user"/></devices></domain>`), "default", netval.MAC{2, 0, 0, 0, 0, 1})
	require.NoError(t, err, "a self-closing interface of another NIC is none of our business")
	_, _, err = SetPodNICMAC([]byte(`<domain><devices><interface type="ethernet" /></devices></domain>`), "default", netval.MAC{2, 0, 0, 0, 0, 1})
	require.NoError(t, err)
}
