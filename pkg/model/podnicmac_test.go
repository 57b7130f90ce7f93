package model_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Issue 30, defects 2 and 3: the pod NIC's MAC follows KubeVirt's LookupPodPrimaryIfaceName
// (pkg/network/multus/status.go: the first network-status entry marked default with an interface name),
// never a later default entry and never Go's map order over pod-networks.
func TestFindPodNIC_PodInterfaceMAC_FollowsKubeVirtsRule(t *testing.T) {
	masq := ifaceSpec{name: "default", pod: true, core: "masquerade"}
	const (
		twoPrimaries = `{"ns1/udn-a":{"ip_addresses":["10.100.0.5/16"],"mac_address":"0a:58:0a:64:00:05","role":"primary"},` +
			`"ns1/udn-b":{"ip_addresses":["10.200.0.5/16"],"mac_address":"0a:58:0a:c8:00:05","role":"primary"},` +
			`"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:07","role":"infrastructure-locked"}}`
		twoPrimariesSameMAC = `{"ns1/udn-a":{"mac_address":"0a:58:0a:64:00:05","role":"primary"},` +
			`"ns1/udn-b":{"mac_address":"0a:58:0a:64:00:05","role":"primary"}}`
	)
	tests := []struct {
		name       string
		status     string
		podNets    string
		wantMAC    string // "" = not known (yet)
		wantSource model.MACSource
		wantErr    []string
	}{
		{"a second default entry never supplies the MAC (the first has none)",
			`[{"name":"ovn-kubernetes","interface":"eth0","default":true},` +
				`{"name":"ns1/other","interface":"net1","mac":"02:00:00:00:00:99","default":true}]`,
			"", "", "", nil},
		{"a second default entry never supplies the MAC (the first's is all-zero): pod-networks' primary does",
			`[{"name":"ovn-kubernetes","interface":"eth0","mac":"00:00:00:00:00:00","default":true},` +
				`{"name":"ns1/other","interface":"net1","mac":"02:00:00:00:00:99","default":true}]`,
			podNetsDefault, "0a:58:0a:f4:01:06", model.MACFromPodNetworks, nil},
		{"a default entry without an interface name is not the primary interface",
			`[{"name":"ovn-kubernetes","mac":"02:00:00:00:00:98","default":true},` +
				`{"name":"ovn-kubernetes","interface":"eth0","mac":"0a:58:0a:f4:01:05","default":true}]`,
			"", "0a:58:0a:f4:01:05", model.MACFromNetworkStatus, nil},
		{"two primaries in pod-networks, no default entry: an error naming both",
			statusNoDefault, twoPrimaries, "", "", []string{`"ns1/udn-a"`, `"ns1/udn-b"`, downwardapi.PodNetworksAnnotation, "role"}},
		{"two primaries with one MAC are not ambiguous",
			statusNoDefault, twoPrimariesSameMAC, "0a:58:0a:64:00:05", model.MACFromPodNetworks, nil},
		{"a default entry settles it: pod-networks is not consulted",
			statusWithDefault, twoPrimaries, "0a:58:0a:f4:01:05", model.MACFromNetworkStatus, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := podSnapshot(tc.status, tc.podNets)
			require.Empty(t, snap.Problems)
			// Map order differs run to run: the answer must not.
			for range 200 {
				nic, err := model.FindPodNIC(newVMI(masq, bound("a", "sriov-a")), snap, testBinding)
				if tc.wantErr != nil {
					require.Error(t, err)
					for _, w := range tc.wantErr {
						assert.Contains(t, err.Error(), w)
					}
					continue
				}
				require.NoError(t, err)
				require.NotNil(t, nic)
				if tc.wantMAC == "" {
					require.Zero(t, nic.Interface.MAC)
					continue
				}
				require.Equal(t, tc.wantMAC, nic.Interface.MAC.String())
				require.Equal(t, tc.wantSource, nic.Interface.MACSource)
			}
		})
	}
}
