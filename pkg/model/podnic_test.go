package model_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// podSnapshot is what Multus and OVN-K write for a pod whose primary interface eth0 has podMAC.
func podSnapshot(networkStatus, podNetworks string) *downwardapi.Snapshot {
	ann := map[string]string{}
	if networkStatus != "" {
		ann[downwardapi.NetworkStatusAnnotation] = networkStatus
	}
	if podNetworks != "" {
		ann[downwardapi.PodNetworksAnnotation] = podNetworks
	}
	return downwardapi.SnapshotFromMaps(nil, ann)
}

const (
	statusWithDefault = `[{"name":"ovn-kubernetes","interface":"eth0","ips":["10.244.1.5"],"mac":"0A:58:0A:F4:01:05","default":true},` +
		`{"name":"ns1/sriov-a","interface":"pod6e2ba3f7b8b","mac":"02:00:00:0a:00:05"}]`
	statusNoDefault    = `[{"name":"ns1/sriov-a","interface":"pod6e2ba3f7b8b","mac":"02:00:00:0a:00:05"}]`
	statusBadMAC       = `[{"name":"ovn-kubernetes","interface":"eth0","mac":"not-a-mac","default":true}]`
	podNetsDefault     = `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:06","role":"primary"}}`
	podNetsInfraLocked = `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:07","role":"infrastructure-locked"},` +
		`"ns1/udn":{"ip_addresses":["10.100.0.5/16"],"mac_address":"0a:58:0a:64:00:05","role":"primary"}}`
)

func TestFindPodNIC(t *testing.T) {
	masq := ifaceSpec{name: "default", pod: true, core: "masquerade"}
	bridge := ifaceSpec{name: "default", pod: true, core: "bridge"}
	tests := []struct {
		name       string
		vmi        *model.VirtualMachineInstance
		snap       *downwardapi.Snapshot
		wantNIC    bool
		wantMAC    string // "" = none (yet)
		wantSource model.MACSource
		fromPod    bool
		unservable bool
		wantErr    string
	}{
		{"masquerade with macAddress: the VMI's", newVMI(ifaceSpec{name: "default", pod: true, core: "masquerade", mac: "02:00:00:00:00:0A"}, bound("a", "sriov-a")),
			podSnapshot(statusWithDefault, ""), true, "02:00:00:00:00:0a", model.MACFromVMI, false, false, ""},
		{"masquerade without: the pod interface's, from network-status", newVMI(masq, bound("a", "sriov-a")),
			podSnapshot(statusWithDefault, podNetsDefault), true, "0a:58:0a:f4:01:05", model.MACFromNetworkStatus, true, false, ""},
		{"bridge without: the same", newVMI(bridge, bound("a", "sriov-a")),
			podSnapshot(statusWithDefault, ""), true, "0a:58:0a:f4:01:05", model.MACFromNetworkStatus, true, false, ""},
		{"no default entry in network-status: pod-networks' primary role", newVMI(masq, bound("a", "sriov-a")),
			podSnapshot(statusNoDefault, podNetsInfraLocked), true, "0a:58:0a:64:00:05", model.MACFromPodNetworks, true, false, ""},
		{"pod-networks default key with role primary", newVMI(masq, bound("a", "sriov-a")),
			podSnapshot("", podNetsDefault), true, "0a:58:0a:f4:01:06", model.MACFromPodNetworks, true, false, ""},
		{"not known yet", newVMI(masq, bound("a", "sriov-a")), podSnapshot(statusNoDefault, ""), true, "", "", true, false, ""},
		{"no snapshot", newVMI(masq, bound("a", "sriov-a")), nil, true, "", "", true, false, ""},
		{"passt plugin without macAddress cannot be served", newVMI(ifaceSpec{name: "default", pod: true, binding: "passt"}, bound("a", "sriov-a")),
			podSnapshot(statusWithDefault, ""), true, "", "", false, true, ""},
		{"passt plugin with macAddress", newVMI(ifaceSpec{name: "default", pod: true, binding: "passt", mac: "02:00:00:00:00:0b"}, bound("a", "sriov-a")),
			podSnapshot(statusWithDefault, ""), true, "02:00:00:00:00:0b", model.MACFromVMI, false, false, ""},
		{"pod NIC bound to us is ours, not a fallback", newVMI(ifaceSpec{name: "default", pod: true, binding: testBinding}), nil, false, "", "", false, false, ""},
		{"hot-unplugged pod NIC", newVMI(ifaceSpec{name: "default", pod: true, core: "masquerade", absent: true}, bound("a", "sriov-a")), nil, false, "", "", false, false, ""},
		{"only secondary networks", newVMI(bound("a", "sriov-a")), nil, false, "", "", false, false, ""},
		{"nil VMI", nil, nil, false, "", "", false, false, ""},
		{"bad VMI MAC names the field", newVMI(ifaceSpec{name: "default", pod: true, core: "masquerade", mac: "zz"}), nil, false, "", "", false, false, `macAddress`},
		// The pod's primary interface is the one whose MAC we use: its bad MAC is an error naming the field.
		{"bad network-status MAC", newVMI(masq, bound("a", "sriov-a")), podSnapshot(statusBadMAC, ""), false, "", "", false, false, "network-status field mac"},
		{"all-zero network-status MAC falls through to pod-networks", newVMI(masq, bound("a", "sriov-a")),
			podSnapshot(`[{"name":"ovn-kubernetes","interface":"eth0","mac":"00:00:00:00:00:00","default":true}]`, podNetsDefault),
			true, "0a:58:0a:f4:01:06", model.MACFromPodNetworks, true, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nic, err := model.FindPodNIC(tc.vmi, tc.snap, testBinding)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), `"default"`, "the error names the interface")
				return
			}
			require.NoError(t, err)
			if !tc.wantNIC {
				assert.Nil(t, nic)
				return
			}
			require.NotNil(t, nic)
			assert.Equal(t, "default", nic.Interface.Name)
			assert.True(t, nic.Interface.DHCP, "DHCPv4, as cloud-init's fallback")
			assert.Empty(t, nic.Interface.Addresses)
			assert.Equal(t, tc.fromPod, nic.FromPod)
			assert.Equal(t, tc.unservable, nic.Unservable != "", "unservable: %q", nic.Unservable)
			if tc.wantMAC == "" {
				assert.Zero(t, nic.Interface.MAC)
				return
			}
			assert.Equal(t, tc.wantMAC, nic.Interface.MAC.String())
			assert.Equal(t, tc.wantSource, nic.Interface.MACSource)
		})
	}
}

func TestMissingForPodNIC_WaitsOnlyForAPodMACThatWillCome(t *testing.T) {
	masq := ifaceSpec{name: "default", pod: true, core: "masquerade"}
	missing := model.MissingForPodNIC(newVMI(masq, bound("a", "sriov-a")), podSnapshot(statusNoDefault, ""), testBinding)
	require.Len(t, missing, 1)
	assert.Equal(t, "default", missing[0].Interface)
	assert.Equal(t, "mac", missing[0].Field)
	assert.Contains(t, missing[0].Source, downwardapi.NetworkStatusAnnotation)

	assert.Empty(t, model.MissingForPodNIC(newVMI(masq, bound("a", "sriov-a")), podSnapshot(statusWithDefault, ""), testBinding), "known")
	passt := ifaceSpec{name: "default", pod: true, binding: "passt"}
	assert.Empty(t, model.MissingForPodNIC(newVMI(passt, bound("a", "sriov-a")), podSnapshot("", ""), testBinding),
		"a MAC that no annotation will bring is not waited for: the hook refuses at once")
	withMAC := ifaceSpec{name: "default", pod: true, core: "bridge", mac: "02:00:00:00:00:01"}
	assert.Empty(t, model.MissingForPodNIC(newVMI(withMAC, bound("a", "sriov-a")), podSnapshot("", ""), testBinding))
}

func TestGivesNetworkData(t *testing.T) {
	for _, tc := range []struct {
		name string
		vol  model.Volume
		want bool
	}{
		{"none", model.Volume{Name: "ci", CloudInitNoCloud: &model.CloudInitSource{}}, false},
		{"blank", model.Volume{Name: "ci", CloudInitNoCloud: &model.CloudInitSource{NetworkData: " \n"}}, false},
		{"inline", model.Volume{Name: "ci", CloudInitNoCloud: &model.CloudInitSource{NetworkData: "version: 2"}}, true},
		{"base64", model.Volume{Name: "ci", CloudInitConfigDrive: &model.CloudInitSource{NetworkDataBase64: "e30="}}, true},
		{"secret", model.Volume{Name: "ci", CloudInitNoCloud: &model.CloudInitSource{NetworkDataSecretRef: &model.SecretRef{Name: "s"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &model.VirtualMachineInstance{Spec: model.VirtualMachineInstanceSpec{Volumes: []model.Volume{tc.vol}}}
			assert.Equal(t, tc.want, vmi.GivesNetworkData())
		})
	}
}
