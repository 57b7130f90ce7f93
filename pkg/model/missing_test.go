package model_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

func TestMissingForCloudInit(t *testing.T) {
	vmi := newVMI(bound("a", "sriov-a"), ifaceSpec{name: "b", nad: "sriov-b", binding: testBinding, mac: "02:00:00:00:00:0b"})
	statusA := st("a", "ns1/sriov-a")
	statusA.IPs = []string{"10.0.0.5"}
	tests := []struct {
		name string
		snap *downwardapi.Snapshot
		want []downwardapi.Missing
	}{
		{
			name: "nothing yet: each interface lacks its entry, the one without VMI MAC its MAC too",
			snap: nil,
			want: []downwardapi.Missing{
				{Interface: "a", Network: "a", Source: "k8s.v1.cni.cncf.io/network-status or k8s.ovn.org/pod-networks",
					Field: `entry for pod interface "` + model.HashedPodInterfaceName("a") + `" or key "ns1/sriov-a"`},
				{Interface: "a", Network: "a", Source: "spec.domain.devices.interfaces[].macAddress, k8s.v1.cni.cncf.io/network-status or k8s.ovn.org/pod-networks",
					Field: "mac"},
				{Interface: "b", Network: "b", Source: "k8s.v1.cni.cncf.io/network-status or k8s.ovn.org/pod-networks",
					Field: `entry for pod interface "` + model.HashedPodInterfaceName("b") + `" or key "ns1/sriov-b"`},
			},
		},
		{
			name: "network-status entry without a MAC: only the MAC is missing",
			snap: &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{statusA},
				PodNetworks: podNetworks(t, `{"ns1/sriov-b":{"ip_addresses":null,"mac_address":"02:00:00:00:00:0b","ipam_mode":"dhcp"}}`)},
			want: []downwardapi.Missing{{Interface: "a", Network: "a",
				Source: "spec.domain.devices.interfaces[].macAddress, k8s.v1.cni.cncf.io/network-status or k8s.ovn.org/pod-networks", Field: "mac"}},
		},
		{
			name: "ready: addresses or DHCP, and a MAC, for every interface",
			snap: &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{
				"ns1/sriov-a":{"ip_addresses":["10.0.0.5/24"],"mac_address":"02:00:00:00:00:0a"},
				"ns1/sriov-b":{"ip_addresses":null,"mac_address":"02:00:00:00:00:0c","ipam_mode":"dhcp"}}`)},
			want: nil,
		},
		{
			name: "wrong input: nil so that a waiting hook stops and Build reports it",
			snap: &downwardapi.Snapshot{Problems: []error{assert.AnError}},
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, model.MissingForCloudInit(vmi, tc.snap, opts()))
		})
	}
}

func TestMissingForDomain(t *testing.T) {
	vmi := newVMI(bound("a", "sriov-a"), bound("b", "sriov-b"))
	statusB := st("b", "ns1/sriov-b")
	statusB.DeviceInfo = &downwardapi.DeviceInfo{Type: downwardapi.DeviceInfoTypeVHostUser}
	tests := []struct {
		name string
		snap *downwardapi.Snapshot
		skip func(string) bool
		want []string // interfaces reported
	}{
		{"no device-info anywhere: both", &downwardapi.Snapshot{}, nil, []string{"a", "b"}},
		{"skipped interfaces are not reported", &downwardapi.Snapshot{}, func(n string) bool { return n == "a" }, []string{"b"}},
		{"a non-pci device-info is present, not missing", &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{statusB}}, nil, []string{"a"}},
		{"device-info file entry satisfies it", &downwardapi.Snapshot{
			DeviceInfo: &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{
				{Network: "a", DeviceInfo: pciInfo("0000:65:00.2")}, {Network: "b", DeviceInfo: pciInfo("0000:65:00.3")}}},
		}, nil, nil},
		{"wrong input: nil", &downwardapi.Snapshot{Problems: []error{assert.AnError}}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.MissingForDomain(vmi, tc.snap, opts(), tc.skip)
			var names []string
			for _, m := range got {
				names = append(names, m.Interface)
				assert.Equal(t, "deviceInfo.pci.pci-address", m.Field)
				assert.Equal(t, "device-info file, kubevirt.io/network-info or k8s.v1.cni.cncf.io/network-status", m.Source)
				assert.Equal(t, m.Interface, m.Network)
			}
			assert.Equal(t, tc.want, names)
		})
	}
}

func TestBoundInterfaceNames_SpecOrderOnlyOursNotAbsent(t *testing.T) {
	vmi := newVMI(bound("z", "n1"), ifaceSpec{name: "core", nad: "n2"}, ifaceSpec{name: "p", nad: "n3", binding: "passt"},
		ifaceSpec{name: "gone", nad: "n4", binding: testBinding, absent: true}, bound("a", "n5"))
	assert.Equal(t, []string{"z", "a"}, model.BoundInterfaceNames(vmi, testBinding))
	assert.Nil(t, model.BoundInterfaceNames(vmi, ""))
	assert.Nil(t, model.BoundInterfaceNames(nil, testBinding))
}

func TestPrimaryFamily(t *testing.T) {
	dual := &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"default":{"ip_addresses":["fd00::3/64","10.0.0.3/24"],"mac_address":"02:00:00:00:00:01"}}`)}
	tests := []struct {
		name  string
		snap  *downwardapi.Snapshot
		podIP string
		want  model.Family
	}{
		{"MY_POD_IP IPv4 wins over pod-networks", dual, "10.0.0.3", model.IPv4},
		{"MY_POD_IP IPv6", nil, "fd00::3", model.IPv6},
		{"first default address of pod-networks", dual, "", model.IPv6},
		{"unparsable MY_POD_IP falls through to pod-networks", dual, "garbage", model.IPv6},
		{"nothing: IPv4", nil, "", model.IPv4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, model.PrimaryFamily(tc.snap, tc.podIP))
		})
	}
}

func TestHashedPodInterfaceName_IsPodPlus11HexOfSHA256(t *testing.T) {
	// echo -n blue | sha256sum = 16477688c0e00699c6cfa4497a3612d7e83c532062b64b250fed8908128ed548
	assert.Equal(t, "pod16477688c0e", model.HashedPodInterfaceName("blue"))
	assert.Len(t, model.HashedPodInterfaceName("a-very-long-network-name-that-exceeds-everything"), 14)
}

// The documented behaviour for an address with no known prefix (network-status only).
func TestGuessPrefix_DefaultsTo24And64_WidensToKeepGatewayOnLink(t *testing.T) {
	tests := []struct {
		name, addr string
		gateways   []string
		want       string
	}{
		{"IPv4 without gateway: /24", "192.168.7.9", nil, "192.168.7.9/24"},
		{"IPv6 without gateway: /64", "2001:db8::9", nil, "2001:db8::9/64"},
		{"gateway inside /24: unchanged", "192.168.7.9", []string{"192.168.7.1"}, "192.168.7.9/24"},
		{"gateway outside /24: widened to the longest prefix holding both", "10.1.200.5", []string{"10.1.0.1"}, "10.1.200.5/16"},
		{"gateway beyond /16: not assumed on-link, /24 kept", "10.1.200.5", []string{"10.9.0.1"}, "10.1.200.5/24"},
		{"IPv6 gateway outside /64: widened", "2001:db8:0:5::9", []string{"2001:db8::1"}, "2001:db8:0:5::9/61"},
		{"IPv6 gateway beyond /48: /64 kept", "2001:db8:1::9", []string{"2001:db9::1"}, "2001:db8:1::9/64"},
		{"gateway of the other family is ignored", "192.168.7.9", []string{"2001:db8::1"}, "192.168.7.9/24"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, model.GuessPrefix(netip.MustParseAddr(tc.addr), addrs(tc.gateways...)).String())
		})
	}
}
