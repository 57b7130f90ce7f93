package model_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// st is a network-status entry for VMI network `network` attached to NAD `nad`, named as KubeVirt
// names the pod interface.
func st(network, nad string) downwardapi.NetworkStatus {
	return downwardapi.NetworkStatus{Name: nad, Interface: model.HashedPodInterfaceName(network)}
}

func pciInfo(addr string) *downwardapi.DeviceInfo {
	return &downwardapi.DeviceInfo{Type: downwardapi.DeviceInfoTypePCI, Version: "1.1.0", Pci: &downwardapi.PciDevice{PciAddress: addr}}
}

func opts() model.Options { return model.Options{BindingName: testBinding} }

func uintp(u uint) *uint { return &u }

func TestBuild_DerivesEachRule(t *testing.T) {
	sriovA := "ns1/sriov-a"
	tests := []struct {
		name  string
		vmi   *model.VirtualMachineInstance
		snap  *downwardapi.Snapshot
		podIP string
		check func(t *testing.T, got []model.BoundInterface)
	}{
		{
			name: "IPv4 only: pod-networks prefixes, routes copied, secondary gets no gateway",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.20.2.5/24"],
				"mac_address":"0a:58:0a:14:02:05","gateway_ips":["10.20.2.1"],
				"routes":[{"dest":"10.20.0.0/16","nextHop":"10.20.2.1"}],"role":"secondary"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				// The whole interface: Gateways stays empty (secondary), everything not listed is unset.
				assert.Equal(t, []model.BoundInterface{{
					Name: "a", Network: "a", NetworkName: "ns1/sriov-a", PodInterfaceName: model.HashedPodInterfaceName("a"),
					MAC: mustMAC(t, "0a:58:0a:14:02:05"), MACSource: model.MACFromPodNetworks,
					Addresses: prefixes("10.20.2.5/24"), PrefixKnown: true,
					Routes: []model.Route{{Dest: netip.MustParsePrefix("10.20.0.0/16"), NextHop: netip.MustParseAddr("10.20.2.1")}},
					Role:   "secondary",
				}}, got)
			},
		},
		{
			name: "IPv6 only: prefix kept, route next hop kept",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["fd10:20::5/64"],
				"mac_address":"0a:58:0a:14:02:05","routes":[{"dest":"fd10::/48","nextHop":"fd10:20::1"}],"role":"secondary"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, []model.BoundInterface{{
					Name: "a", Network: "a", NetworkName: "ns1/sriov-a", PodInterfaceName: model.HashedPodInterfaceName("a"),
					MAC: mustMAC(t, "0a:58:0a:14:02:05"), MACSource: model.MACFromPodNetworks,
					Addresses: prefixes("fd10:20::5/64"), PrefixKnown: true,
					Routes: []model.Route{{Dest: netip.MustParsePrefix("fd10::/48"), NextHop: netip.MustParseAddr("fd10:20::1")}},
					Role:   "secondary",
				}}, got)
			},
		},
		{
			name: "dual-stack, IPv4 primary from pod-networks default: IPv4 first everywhere, one gateway per family",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{
				"default":{"ip_addresses":["10.244.0.3/24","fd00:10:244::3/64"],"mac_address":"0a:58:0a:f4:00:03"},
				"ns1/sriov-a":{"ip_addresses":["fd10:100::5/64","10.100.0.5/16"],"mac_address":"0a:58:0a:64:00:05",
				"gateway_ips":["fd10:100::1","10.100.0.1","10.100.0.254"],
				"routes":[{"dest":"fd00:10:96::/112","nextHop":"fd10:100::1"},{"dest":"10.96.0.0/16","nextHop":"10.100.0.1"}],
				"ipv6_lla_gateway_ip":"fe80::858:aff:fe64:1","role":"primary"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, prefixes("10.100.0.5/16", "fd10:100::5/64"), got[0].Addresses)
				assert.Equal(t, addrs("10.100.0.1", "fd10:100::1"), got[0].Gateways)
				assert.Equal(t, "10.96.0.0/16", got[0].Routes[0].Dest.String())
				assert.Equal(t, "fd00:10:96::/112", got[0].Routes[1].Dest.String())
			},
		},
		{
			name:  "dual-stack, IPv6 primary from MY_POD_IP: IPv6 first everywhere",
			vmi:   newVMI(bound("a", "sriov-a")),
			podIP: "fd00:10:244::3",
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{
				"default":{"ip_addresses":["10.244.0.3/24"],"mac_address":"0a:58:0a:f4:00:03"},
				"ns1/sriov-a":{"ip_addresses":["10.100.0.5/16","fd10:100::5/64"],"mac_address":"0a:58:0a:64:00:05",
				"gateway_ips":["10.100.0.1","fd10:100::1"],
				"routes":[{"dest":"10.96.0.0/16","nextHop":"10.100.0.1"},{"dest":"fd00:10:96::/112","nextHop":"fd10:100::1"}],
				"role":"primary"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, prefixes("fd10:100::5/64", "10.100.0.5/16"), got[0].Addresses)
				assert.Equal(t, addrs("fd10:100::1", "10.100.0.1"), got[0].Gateways)
				assert.Equal(t, "fd00:10:96::/112", got[0].Routes[0].Dest.String())
			},
		},
		{
			name: "two SR-IOV NICs: spec order, each with its own VF, MAC and pod interface",
			vmi: newVMI(bound("b", "ns2/sriov-b"), ifaceSpec{name: "masq", pod: true},
				ifaceSpec{name: "a", nad: "sriov-a", binding: testBinding, pci: "0000:0A:01.0", boot: uintp(2)}),
			snap: &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{
				{Name: "ovn-kubernetes", Interface: "eth0", IPs: []string{"10.244.0.3"}, Default: true},
				func() downwardapi.NetworkStatus {
					s := st("a", sriovA)
					s.Mac, s.DeviceInfo = "02:00:00:00:00:0a", pciInfo("0000:65:00.2")
					return s
				}(),
				func() downwardapi.NetworkStatus {
					s := st("b", "ns2/sriov-b")
					s.Mac, s.DeviceInfo = "02:00:00:00:00:0b", pciInfo("0000:65:00.3")
					return s
				}(),
			}},
			check: func(t *testing.T, got []model.BoundInterface) {
				// network-status only, no IPs for the VFs: no addresses, PrefixKnown false.
				assert.Equal(t, []model.BoundInterface{
					{
						Name: "b", Network: "b", NetworkName: "ns2/sriov-b", PodInterfaceName: model.HashedPodInterfaceName("b"),
						MAC: mustMAC(t, "02:00:00:00:00:0b"), MACSource: model.MACFromNetworkStatus,
						HostPCIAddress: "0000:65:00.3", DeviceType: "pci",
					},
					{
						Name: "a", Network: "a", NetworkName: sriovA, PodInterfaceName: model.HashedPodInterfaceName("a"),
						MAC: mustMAC(t, "02:00:00:00:00:0a"), MACSource: model.MACFromNetworkStatus,
						HostPCIAddress: "0000:65:00.2", DeviceType: "pci", GuestPCIAddress: "0000:0a:01.0", BootOrder: uintp(2),
					},
				}, got)
			},
		},
		{
			name: "layer2 secondary: no routes and no gateway even when gateway_ips is present",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.10.0.4/24"],
				"mac_address":"0a:58:0a:0a:00:04","gateway_ips":["10.10.0.1"],"tunnel_id":7,"role":"secondary"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Empty(t, got[0].Gateways)
				assert.Empty(t, got[0].Routes)
			},
		},
		{
			name: "explicit gateway: network-status default route on a secondary becomes the gateway",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{
				PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.10.0.4/24"],"mac_address":"0a:58:0a:0a:00:04","role":"secondary"}}`),
				NetworkStatus: func() []downwardapi.NetworkStatus {
					s := st("a", sriovA)
					s.IPs, s.Gateway = []string{"10.10.0.4"}, []string{"10.10.0.254"}
					return []downwardapi.NetworkStatus{s}
				}(),
			},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, addrs("10.10.0.254"), got[0].Gateways)
				assert.Equal(t, prefixes("10.10.0.4/24"), got[0].Addresses, "pod-networks addresses win over network-status ips")
			},
		},
		{
			name: "pod-networks default route becomes a gateway, never a route",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.10.0.4/24","fd00::4/64"],
				"mac_address":"0a:58:0a:0a:00:04","role":"secondary",
				"routes":[{"dest":"0.0.0.0/0","nextHop":"10.10.0.1"},{"dest":"::/0","nextHop":"fd00::1"},{"dest":"10.0.0.0/8","nextHop":"10.10.0.1"}]}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, addrs("10.10.0.1", "fd00::1"), got[0].Gateways)
				assert.Equal(t, []model.Route{{Dest: netip.MustParsePrefix("10.0.0.0/8"), NextHop: netip.MustParseAddr("10.10.0.1")}}, got[0].Routes)
			},
		},
		{
			name: "localnet with ipam_mode dhcp: DHCP set, no addresses",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":null,
				"mac_address":"0a:58:0a:0a:00:04","role":"secondary","ipam_mode":"dhcp"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.True(t, got[0].DHCP)
				assert.Empty(t, got[0].Addresses)
				assert.False(t, got[0].PrefixKnown)
			},
		},
		{
			// OKEP-6224 / ovn-kubernetes #6666: ovnkube-node patches the lease it discovered into the entry,
			// with gateway_ips; a secondary's gateway never becomes a default route, and DHCP stays set.
			name: "localnet with ipam_mode dhcp after the lease: DHCP set, the lease as addresses, no gateway",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.1.192.213/24"],
				"gateway_ips":["10.1.192.1"],"mac_address":"0a:58:0a:0a:00:04","role":"secondary","ipam_mode":"dhcp"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.True(t, got[0].DHCP)
				assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.192.213/24")}, got[0].Addresses)
				assert.True(t, got[0].PrefixKnown)
				assert.Empty(t, got[0].Gateways)
			},
		},
		{
			name: "MTU and DNS from network-status, nameservers and search de-duplicated",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: func() []downwardapi.NetworkStatus {
				s := st("a", sriovA)
				s.Mtu = 9000
				s.DNS = downwardapi.DNS{Nameservers: []string{"10.96.0.10", "fd00::10", "10.96.0.10"},
					Search: []string{"ns1.svc.cluster.local", "cluster.local", "cluster.local"}, Domain: "cluster.local"}
				return []downwardapi.NetworkStatus{s}
			}()},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, 9000, got[0].MTU)
				assert.Equal(t, addrs("10.96.0.10", "fd00::10"), got[0].DNS.Nameservers)
				assert.Equal(t, []string{"ns1.svc.cluster.local", "cluster.local"}, got[0].DNS.Search)
				assert.Equal(t, "cluster.local", got[0].DNS.Domain)
			},
		},
		{
			name: "network-status only: bare IPs get /24 and /64, PrefixKnown false, IPv6 link-local dropped, duplicates dropped",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: func() []downwardapi.NetworkStatus {
				s := st("a", sriovA)
				s.IPs = []string{"fe80::1", "192.168.7.9", "2001:db8::9", "192.168.7.9"}
				return []downwardapi.NetworkStatus{s}
			}()},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, prefixes("192.168.7.9/24", "2001:db8::9/64"), got[0].Addresses)
				assert.False(t, got[0].PrefixKnown)
			},
		},
		{
			name: "network-status only: guessed prefix widens so the gateway is on-link; link-local gateway dropped",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: func() []downwardapi.NetworkStatus {
				s := st("a", sriovA)
				s.IPs = []string{"10.1.200.5", "2001:db8:0:5::9"}
				s.Gateway = []string{"10.1.0.1", "fe80::1", "2001:db8::1"}
				return []downwardapi.NetworkStatus{s}
			}()},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, prefixes("10.1.200.5/16", "2001:db8:0:5::9/61"), got[0].Addresses)
				assert.Equal(t, addrs("10.1.0.1", "2001:db8::1"), got[0].Gateways)
				for _, a := range got[0].Addresses {
					for _, g := range got[0].Gateways {
						if model.FamilyOf(g) == model.FamilyOf(a.Addr()) {
							assert.True(t, a.Masked().Contains(g), "gateway %s on-link for %s", g, a)
						}
					}
				}
			},
		},
		{
			name: "multus networkName without namespace defaults to the VMI's",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.0.0.2/24"],"mac_address":"02:00:00:00:00:02"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, "ns1/sriov-a", got[0].NetworkName)
				assert.Equal(t, prefixes("10.0.0.2/24"), got[0].Addresses)
			},
		},
		{
			name: "the same NAD twice: the second attachment reads the indexed key <ns>/<nad>/1",
			vmi:  newVMI(bound("a", "sriov-a"), bound("b", "ns1/sriov-a")),
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{
				"ns1/sriov-a":{"ip_addresses":["10.0.0.2/24"],"mac_address":"02:00:00:00:00:02"},
				"ns1/sriov-a/1":{"ip_addresses":["10.0.0.3/24"],"mac_address":"02:00:00:00:00:03"}}`)},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, prefixes("10.0.0.2/24"), got[0].Addresses)
				assert.Equal(t, prefixes("10.0.0.3/24"), got[1].Addresses)
			},
		},
		{
			name: "legacy ordinal pod interface names (net1, net2) are matched like KubeVirt does",
			vmi:  newVMI(bound("x", "other"), bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{
				{Name: "ns1/other", Interface: "net1", Mac: "02:00:00:00:00:01"},
				{Name: sriovA, Interface: "net2", Mac: "02:00:00:00:00:02", IPs: []string{"10.0.0.2"}},
			}},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, "net2", got[1].PodInterfaceName)
				assert.Equal(t, "02:00:00:00:00:02", got[1].MAC.String())
			},
		},
		{
			name: "interfaces not bound to us (core sriov, other plugins, hot-unplugged) are left out",
			vmi: newVMI(ifaceSpec{name: "core", nad: "sriov-a"}, ifaceSpec{name: "other", nad: "x", binding: "passt"},
				ifaceSpec{name: "gone", nad: "y", binding: testBinding, absent: true}, bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{},
			check: func(t *testing.T, got []model.BoundInterface) {
				require.Len(t, got, 1)
				assert.Equal(t, "a", got[0].Name)
			},
		},
		{
			name: "nothing arrived yet: interface built with empty fields, no error",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: nil,
			check: func(t *testing.T, got []model.BoundInterface) {
				require.Len(t, got, 1)
				assert.Zero(t, got[0].MAC)
				assert.Empty(t, got[0].Addresses)
				assert.Empty(t, got[0].HostPCIAddress)
			},
		},
		{
			name: "non-pci device-info is recorded, not wired",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: func() []downwardapi.NetworkStatus {
				s := st("a", sriovA)
				s.DeviceInfo = &downwardapi.DeviceInfo{Type: downwardapi.DeviceInfoTypeVDPA, Vdpa: &downwardapi.VdpaDevice{ParentDevice: "vdpa:0000:65:00.2"}}
				return []downwardapi.NetworkStatus{s}
			}()},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, "vdpa", got[0].DeviceType)
				assert.Empty(t, got[0].HostPCIAddress)
			},
		},
		{
			name: "network-status naming the NAD without namespace is accepted for the VMI's namespace",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{
				{Name: "sriov-a", Interface: model.HashedPodInterfaceName("a"), Mac: "02:00:00:00:00:0a"}}},
			check: func(t *testing.T, got []model.BoundInterface) {
				assert.Equal(t, "02:00:00:00:00:0a", got[0].MAC.String())
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.PodIP = tc.podIP
			got, err := model.Build(tc.vmi, tc.snap, o)
			require.NoError(t, err)
			require.NotEmpty(t, got)
			tc.check(t, got)
		})
	}
}

func TestBuild_MACPrecedence_VMIThenNetworkStatusThenNetworkInfoThenPodNetworks(t *testing.T) {
	const (
		vmiMAC    = "02:00:00:00:00:01"
		statusMAC = "02:00:00:00:00:02"
		infoMAC   = "02:00:00:00:00:03"
		podNetMAC = "02:00:00:00:00:04"
	)
	type sources struct{ vmi, status, info, podNet bool }
	tests := []struct {
		name       string
		have       sources
		wantMAC    string
		wantSource model.MACSource
	}{
		{"all sources: VMI wins", sources{true, true, true, true}, vmiMAC, model.MACFromVMI},
		{"no VMI MAC: network-status wins", sources{false, true, true, true}, statusMAC, model.MACFromNetworkStatus},
		{"network-info next", sources{false, false, true, true}, infoMAC, model.MACFromNetworkInfo},
		{"pod-networks last", sources{false, false, false, true}, podNetMAC, model.MACFromPodNetworks},
		{"no source: no MAC", sources{}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := bound("a", "sriov-a")
			if tc.have.vmi {
				spec.mac = vmiMAC
			}
			snap := &downwardapi.Snapshot{}
			s := st("a", "ns1/sriov-a")
			if tc.have.status {
				s.Mac = statusMAC
			}
			snap.NetworkStatus = []downwardapi.NetworkStatus{s}
			if tc.have.info {
				snap.NetworkInfo = &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{{Network: "a", Mac: infoMAC}}}
			}
			if tc.have.podNet {
				snap.PodNetworks = downwardapi.PodNetworks{"ns1/sriov-a": {MAC: mustMAC(t, podNetMAC)}}
			}
			got, err := model.Build(newVMI(spec), snap, opts())
			require.NoError(t, err)
			require.Len(t, got, 1)
			if tc.wantMAC == "" {
				assert.Zero(t, got[0].MAC)
			} else {
				assert.Equal(t, tc.wantMAC, got[0].MAC.String())
			}
			assert.Equal(t, tc.wantSource, got[0].MACSource)
		})
	}
}

func TestBuild_ZeroMACInNetworkStatus_CountsAsAbsent(t *testing.T) {
	s := st("a", "ns1/sriov-a")
	s.Mac = "00:00:00:00:00:00"
	snap := &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{s},
		PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"mac_address":"0a:58:00:00:00:01"}}`)}
	got, err := model.Build(newVMI(bound("a", "sriov-a")), snap, opts())
	require.NoError(t, err)
	assert.Equal(t, "0a:58:00:00:00:01", got[0].MAC.String())
	assert.Equal(t, model.MACFromPodNetworks, got[0].MACSource)
}

func TestFamily_String(t *testing.T) {
	assert.Equal(t, "IPv4", model.IPv4.String())
	assert.Equal(t, "IPv6", model.IPv6.String())
	assert.Equal(t, "unknown", model.Family(0).String())
}

func TestBuild_DeviceInfoPrecedence_FileThenAnnotationThenNetworkStatus(t *testing.T) {
	file := &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{{Network: "a", DeviceInfo: pciInfo("0000:65:00.1")}}}
	ann := &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{{Network: "a", DeviceInfo: pciInfo("0000:65:00.2")}}}
	s := st("a", "ns1/sriov-a")
	s.DeviceInfo = pciInfo("0000:65:00.3")
	status := []downwardapi.NetworkStatus{s}
	tests := []struct {
		name string
		snap *downwardapi.Snapshot
		want string
	}{
		{"device-info file first", &downwardapi.Snapshot{DeviceInfo: file, NetworkInfo: ann, NetworkStatus: status}, "0000:65:00.1"},
		{"then the network-info annotation", &downwardapi.Snapshot{NetworkInfo: ann, NetworkStatus: status}, "0000:65:00.2"},
		{"then network-status device-info", &downwardapi.Snapshot{NetworkStatus: status}, "0000:65:00.3"},
		{"an entry without deviceInfo falls through", &downwardapi.Snapshot{
			DeviceInfo:    &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{{Network: "a"}}},
			NetworkStatus: status}, "0000:65:00.3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := model.Build(newVMI(bound("a", "sriov-a")), tc.snap, opts())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got[0].HostPCIAddress)
		})
	}
}

func TestBuild_NoBoundInterface_ReturnsNilEvenWithMalformedSnapshot(t *testing.T) {
	vmi := newVMI(ifaceSpec{name: "core", nad: "sriov-a"})
	got, err := model.Build(vmi, &downwardapi.Snapshot{Problems: []error{assert.AnError}}, opts())
	require.NoError(t, err)
	assert.Nil(t, got)
}

func mustMAC(t *testing.T, s string) netval.MAC {
	t.Helper()
	mac, err := netval.ParseMAC(s)
	require.NoError(t, err)
	return mac
}

func TestBuild_MultusDefaultNetwork_UsesPodInterfaceEth0(t *testing.T) {
	spec := bound("a", "ns2/default-nad")
	spec.def = true
	snap := &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{{Name: "ns2/default-nad", Interface: "eth0", IPs: []string{"10.0.0.7"}, Default: true}}}
	got, err := model.Build(newVMI(spec), snap, opts())
	require.NoError(t, err)
	assert.Equal(t, "eth0", got[0].PodInterfaceName)
	assert.Equal(t, prefixes("10.0.0.7/24"), got[0].Addresses)
}

func TestBuild_ResultSharesNoMemoryWithSnapshot(t *testing.T) {
	boot := uint(3)
	spec := bound("a", "sriov-a")
	spec.boot = &boot
	vmi := newVMI(spec)
	snap := &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"ip_addresses":["10.0.0.5/24"],"mac_address":"02:00:00:00:00:0a"}}`)}
	got, err := model.Build(vmi, snap, opts())
	require.NoError(t, err)
	got[0].MAC[5] = 0xff
	*got[0].BootOrder = 9
	assert.Equal(t, "02:00:00:00:00:0a", snap.PodNetworks["ns1/sriov-a"].MAC.String())
	assert.Equal(t, uint(3), *vmi.Spec.Domain.Devices.Interfaces[0].BootOrder)
}
