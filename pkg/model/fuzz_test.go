package model_test

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

const seedVMI = `{"metadata":{"name":"vm1","namespace":"ns1"},"spec":{"domain":{"devices":{"interfaces":[
{"name":"a","binding":{"name":"sriov-udn"},"macAddress":"02:00:00:00:00:0a","pciAddress":"0000:0a:01.0","bootOrder":2},
{"name":"b","binding":{"name":"sriov-udn"}},{"name":"c","sriov":{}}]}},
"networks":[{"name":"a","multus":{"networkName":"sriov-a"}},{"name":"b","multus":{"networkName":"ns2/sriov-b"}},
{"name":"c","multus":{"networkName":"sriov-a"}}]}}`

// FuzzBuild feeds JSON-decoded VMIs and annotation values to Build and the Missing* functions: they
// must never panic, and whatever Build accepts must keep the model's invariants.
func FuzzBuild(f *testing.F) {
	f.Add(seedVMI,
		`[{"name":"ns1/sriov-a","interface":"pod`+model.HashedPodInterfaceName("a")[3:]+`","ips":["10.0.0.5","fe80::1"],"mac":"02:00:00:00:00:0a","mtu":1500,"dns":{"nameservers":["10.96.0.10"],"search":["cluster.local"]},"gateway":["10.0.0.1"],"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2"}}}]`,
		`{"default":{"ip_addresses":["fd00::3/64"],"mac_address":"0a:58:0a:f4:00:03"},"ns2/sriov-b":{"ip_addresses":["10.1.0.5/24","fd01::5/64"],"mac_address":"0a:58:0a:01:00:05","gateway_ips":["10.1.0.1","fd01::1"],"routes":[{"dest":"10.96.0.0/16","nextHop":"10.1.0.1"},{"dest":"::/0","nextHop":"fd01::1"}],"role":"primary"}}`,
		`{"interfaces":[{"network":"b","deviceInfo":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.3"}},"mac":"02:00:00:00:00:0b"}]}`,
		"")
	f.Add(seedVMI, `[{"name":"ns1/sriov-a","interface":"net1","mac":"02:00:00:00:00:0a"}]`,
		`{"ns1/sriov-a":{"ip_addresses":null,"mac_address":"02:00:00:00:00:0a","ipam_mode":"dhcp"}}`, `{}`, "fd00::1")
	f.Add(`{"metadata":{"namespace":"ns1"},"spec":{"domain":{"devices":{"interfaces":[{"name":"a\n","binding":{"name":"sriov-udn"}}]}},"networks":[{"name":"a\n","multus":{"networkName":"../x"}}]}}`,
		`[{"name":"x","interface":"eth0","mac":"01:00:5e:00:00:01","device-info":{"type":"memif"}}]`, `{"x":{}}`, `{"interfaces":[{"network":"a"},{"network":"a"}]}`, "bad")
	f.Add(`{}`, `null`, `null`, `null`, "")

	f.Fuzz(func(t *testing.T, vmiJSON, statusJSON, podNetworksJSON, networkInfoJSON, podIP string) {
		vmi := &model.VirtualMachineInstance{}
		if err := json.Unmarshal([]byte(vmiJSON), vmi); err != nil {
			return
		}
		snap := &downwardapi.Snapshot{PodInfo: true}
		var statuses []downwardapi.NetworkStatus
		if json.Unmarshal([]byte(statusJSON), &statuses) == nil {
			snap.NetworkStatus = statuses
		}
		if pn, err := decodePodNetworks([]byte(podNetworksJSON)); err == nil {
			snap.PodNetworks = pn
		}
		var info downwardapi.NetworkInfo
		if json.Unmarshal([]byte(networkInfoJSON), &info) == nil {
			snap.NetworkInfo = &info
			snap.DeviceInfo = &info
		}
		o := model.Options{BindingName: testBinding, PodIP: podIP}

		got, err := model.Build(vmi, snap, o)
		t.Logf("Build: %d interfaces, error: %v", len(got), err)
		_ = model.MissingForCloudInit(vmi, snap, o)
		_ = model.MissingForDomain(vmi, snap, o, func(string) bool { return false })
		if err != nil {
			if got != nil {
				t.Fatalf("Build returned interfaces and an error %v", err)
			}
			return
		}
		checkInvariants(t, got, model.BoundInterfaceNames(vmi, testBinding), model.PrimaryFamily(snap, podIP))
	})
}

func checkInvariants(t *testing.T, got []model.BoundInterface, names []string, primary model.Family) {
	t.Helper()
	if len(got) != len(names) {
		t.Fatalf("Build returned %d interfaces, BoundInterfaceNames %d", len(got), len(names))
	}
	macs := map[string]bool{}
	for i, bi := range got {
		if bi.Name != names[i] {
			t.Fatalf("interface %d is %q, want %q", i, bi.Name, names[i])
		}
		if !bi.MAC.IsZero() {
			if macs[bi.MAC.String()] {
				t.Fatalf("interface %q: bad or duplicate MAC %s", bi.Name, bi.MAC)
			}
			macs[bi.MAC.String()] = true
		}
		if bi.HostPCIAddress != "" && bi.DeviceType != downwardapi.DeviceInfoTypePCI {
			t.Fatalf("interface %q: host PCI address with device type %q", bi.Name, bi.DeviceType)
		}
		checkFamilyOrder(t, bi.Name, "addresses", primary, len(bi.Addresses), func(i int) netip.Addr { return bi.Addresses[i].Addr() })
		checkFamilyOrder(t, bi.Name, "gateways", primary, len(bi.Gateways), func(i int) netip.Addr { return bi.Gateways[i] })
		checkFamilyOrder(t, bi.Name, "routes", primary, len(bi.Routes), func(i int) netip.Addr { return bi.Routes[i].Dest.Addr() })
		if len(bi.Gateways) > 2 || (len(bi.Gateways) == 2 && model.FamilyOf(bi.Gateways[0]) == model.FamilyOf(bi.Gateways[1])) {
			t.Fatalf("interface %q: more than one gateway per family: %v", bi.Name, bi.Gateways)
		}
		seen := map[netip.Addr]bool{}
		for _, p := range bi.Addresses {
			if seen[p.Addr()] || (p.Addr().Is6() && p.Addr().IsLinkLocalUnicast()) {
				t.Fatalf("interface %q: duplicate or link-local address %s", bi.Name, p)
			}
			seen[p.Addr()] = true
		}
		for _, r := range bi.Routes {
			if r.Dest.Bits() == 0 {
				t.Fatalf("interface %q: default route %s among routes", bi.Name, r.Dest)
			}
		}
	}
}

func checkFamilyOrder(t *testing.T, iface, what string, primary model.Family, n int, addr func(int) netip.Addr) {
	t.Helper()
	other := false
	for i := 0; i < n; i++ {
		if model.FamilyOf(addr(i)) != primary {
			other = true
		} else if other {
			t.Fatalf("interface %q: %s not ordered primary family (%s) first", iface, what, primary)
		}
	}
}
