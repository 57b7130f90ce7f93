package model_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The pod NIC's MAC follows KubeVirt's LookupPodPrimaryIfaceName
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

// Strictness: a network-status entry that is not ours is not our business, whatever is wrong in
// it; the same fault in our own entry fails, naming the field.
func TestBuild_NetworkStatusEntriesNotOurs_AreIgnored(t *testing.T) {
	ourIface := model.HashedPodInterfaceName("a")
	ours := `{"name":"ns1/sriov-a","interface":"` + ourIface + `","ips":["10.0.0.5"],"mac":"02:00:00:0a:00:05"}`
	for _, tc := range []struct{ name, bad, field string }{
		{"nameserver", `"dns":{"nameservers":["dns.example"]}`, "dns.nameservers[0]"},
		{"search domain", `"dns":{"search":["bad domain\nnameserver 6.6.6.6"]}`, "dns.search[0]"},
		{"ip", `"ips":["10.0.0.300"]`, "ips[0]"},
		{"mac", `"mac":"zz"`, "mac"},
		{"mtu", `"mtu":-1`, "mtu"},
		{"gateway", `"gateway":["gw.example"]`, "gateway[0]"},
		{"pci address", `"device-info":{"type":"pci","pci":{"pci-address":"65:00.2"}}`, "device-info.pci.pci-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			foreign := `{"name":"ns1/not-ours","interface":"pod0123456789a",` + tc.bad + `}`
			snap := podSnapshot(`[`+ours+`,`+foreign+`]`, "")
			require.Empty(t, snap.Problems, "the parser checks the document, not every entry")
			got, err := model.Build(newVMI(bound("a", "sriov-a")), snap, model.Options{BindingName: testBinding})
			require.NoError(t, err, "an entry that is not ours")
			require.Len(t, got, 1)
			assert.Equal(t, "02:00:00:0a:00:05", got[0].MAC.String())

			// The same fault in our own entry.
			mine := `{"name":"ns1/sriov-a","interface":"` + ourIface + `","ips":["10.0.0.5"],"mac":"02:00:00:0a:00:05",` + tc.bad + `}`
			if tc.name == "mac" || tc.name == "ip" {
				mine = `{"name":"ns1/sriov-a","interface":"` + ourIface + `",` + tc.bad + `}`
			}
			_, err = model.Build(newVMI(bound("a", "sriov-a")), podSnapshot(`[`+mine+`]`, ""), model.Options{BindingName: testBinding})
			require.Error(t, err)
			assert.Contains(t, err.Error(), downwardapi.NetworkStatusAnnotation)
			assert.Contains(t, err.Error(), "field "+tc.field)
		})
	}
}
