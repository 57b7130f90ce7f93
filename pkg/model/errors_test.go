package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

func statusWith(mut func(*downwardapi.NetworkStatus)) []downwardapi.NetworkStatus {
	s := st("a", "ns1/sriov-a")
	mut(&s)
	return []downwardapi.NetworkStatus{s}
}

func TestBuild_WrongInput_ReturnsInputErrorNamingInterfaceSourceAndField(t *testing.T) {
	tests := []struct {
		name        string
		vmi         *model.VirtualMachineInstance
		snap        *downwardapi.Snapshot
		podIP       string
		wantSource  string
		wantField   string
		wantMessage string
	}{
		{
			name:        "duplicate MACs across bound interfaces",
			vmi:         newVMI(ifaceSpec{name: "a", nad: "sriov-a", binding: testBinding, mac: "02:00:00:00:00:01"}, bound("b", "sriov-b")),
			snap:        &downwardapi.Snapshot{NetworkStatus: []downwardapi.NetworkStatus{{Name: "ns1/sriov-b", Interface: model.HashedPodInterfaceName("b"), Mac: "02:00:00:00:00:01"}}},
			wantSource:  downwardapi.NetworkStatusAnnotation,
			wantField:   "mac",
			wantMessage: `also the MAC of interface "a"`,
		},
		{
			name:       "bound interface without a network",
			vmi:        func() *model.VirtualMachineInstance { v := newVMI(bound("a", "x")); v.Spec.Networks = nil; return v }(),
			wantSource: model.SourceVMI, wantField: "spec.networks", wantMessage: "no network",
		},
		{
			name:       "bound interface on the pod network",
			vmi:        newVMI(ifaceSpec{name: "a", pod: true, binding: testBinding}),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus", wantMessage: "not a Multus network",
		},
		{
			name:       "hostile interface name",
			vmi:        newVMI(bound("a/../../etc\n", "x")),
			wantSource: model.SourceVMI, wantField: "spec.domain.devices.interfaces[0].name", wantMessage: "invalid interface name",
		},
		{
			name:       "hostile networkName",
			vmi:        newVMI(bound("a", "../etc/passwd")),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus.networkName", wantMessage: "invalid namespace",
		},
		{
			name:       "namespace starting with a dash",
			vmi:        newVMI(bound("a", "-ns/nad")),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus.networkName", wantMessage: "invalid namespace",
		},
		{
			name:       "namespace longer than a DNS label",
			vmi:        newVMI(bound("a", strings.Repeat("n", 64)+"/nad")),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus.networkName", wantMessage: "invalid namespace",
		},
		{
			name:       "NAD name with an empty label",
			vmi:        newVMI(bound("a", "ns1/a..b")),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus.networkName", wantMessage: "invalid NetworkAttachmentDefinition name",
		},
		{
			name:       "NAD name label ending with a dash",
			vmi:        newVMI(bound("a", "ns1/a-.b")),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus.networkName", wantMessage: "invalid NetworkAttachmentDefinition name",
		},
		{
			name:       "networkName with three parts",
			vmi:        newVMI(bound("a", "ns1/nad/1")),
			wantSource: model.SourceVMI, wantField: "spec.networks[].multus.networkName", wantMessage: "invalid NetworkAttachmentDefinition name",
		},
		{
			name:       "invalid VMI MAC",
			vmi:        newVMI(ifaceSpec{name: "a", nad: "n", binding: testBinding, mac: "zz:00"}),
			wantSource: model.SourceVMI, wantField: "spec.domain.devices.interfaces[].macAddress", wantMessage: "invalid MAC",
		},
		{
			name:       "multicast MAC in network-status",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.Mac = "01:00:5e:00:00:01" })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "mac", wantMessage: "multicast",
		},
		{
			name: "20-byte InfiniBand MAC in network-status",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) {
				s.Mac = "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"
			})},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "mac", wantMessage: "not a 48-bit",
		},
		{
			name:       "invalid guest pciAddress",
			vmi:        newVMI(ifaceSpec{name: "a", nad: "n", binding: testBinding, pci: "0000:00:1f.8"}),
			wantSource: model.SourceVMI, wantField: "spec.domain.devices.interfaces[].pciAddress", wantMessage: "invalid PCI address",
		},
		{
			name:       "hostile host PCI address in network-status device-info",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.DeviceInfo = pciInfo("0000:65:00.2'/><evil/>") })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "device-info.pci.pci-address", wantMessage: "invalid PCI address",
		},
		{
			name: "pci device-info without an address in the device-info file",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{DeviceInfo: &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{
				{Network: "a", DeviceInfo: &downwardapi.DeviceInfo{Type: "pci"}}}}},
			wantSource: model.SourceDeviceInfoFile, wantField: "interfaces[].deviceInfo.pci.pci-address", wantMessage: "without a PCI address",
		},
		{
			name:       "unknown device type",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.DeviceInfo = &downwardapi.DeviceInfo{Type: "pci\x00evil"} })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "device-info.type", wantMessage: `unknown device type "pci\x00evil"`,
		},
		{
			name: "two network-info entries for one network",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkInfo: &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{
				{Network: "a"}, {Network: "a"}}}},
			wantSource: downwardapi.NetworkInfoAnnotation, wantField: "interfaces[].network", wantMessage: "several entries",
		},
		{
			name:       "network-status entry of our pod interface names another NAD",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.Name = "ns2/sriov-a" })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "name", wantMessage: `names network "ns2/sriov-a", expected "ns1/sriov-a"`,
		},
		{
			name: "two network-status entries for our pod interface",
			vmi:  newVMI(bound("a", "sriov-a")),
			snap: &downwardapi.Snapshot{NetworkStatus: append(statusWith(func(*downwardapi.NetworkStatus) {}),
				statusWith(func(*downwardapi.NetworkStatus) {})...)},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "interface", wantMessage: "several entries",
		},
		{
			name:       "invalid IP in network-status ips",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.IPs = []string{"10.0.0.300"} })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "ips[0]", wantMessage: "invalid IP address",
		},
		{
			name:       "multicast gateway in network-status",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.Gateway = []string{"224.0.0.1"} })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "gateway[0]", wantMessage: "not a unicast",
		},
		{
			name:       "zoned nameserver",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.DNS.Nameservers = []string{"fe80::1%eth0"} })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "dns.nameservers[0]", wantMessage: "zone",
		},
		{
			name:       "search domain with a newline (resolv.conf injection)",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.DNS.Search = []string{"ok.local\nnameserver 6.6.6.6"} })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "dns.search[0]", wantMessage: "invalid domain",
		},
		{
			name:       "MTU out of range",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.Mtu = -1 })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "mtu", wantMessage: "out of range",
		},
		{
			name:       "unknown ipam_mode",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"mac_address":"02:00:00:00:00:01","ipam_mode":"slaac"}}`)},
			wantSource: downwardapi.PodNetworksAnnotation, wantField: "ipam_mode", wantMessage: "unsupported IPAM mode",
		},
		{
			name:       "route next hop of the other family",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"10.0.0.0/8","nextHop":"fd00::1"}]}}`)},
			wantSource: downwardapi.PodNetworksAnnotation, wantField: "routes[0].nextHop", wantMessage: "not in the family",
		},
		{
			name:       "default route without next hop",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"0.0.0.0/0"}]}}`)},
			wantSource: downwardapi.PodNetworksAnnotation, wantField: "routes[0].nextHop", wantMessage: "missing IP address",
		},
		{
			name:       "unspecified address in pod-networks",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"mac_address":"02:00:00:00:00:01","ip_addresses":["0.0.0.0/0"]}}`)},
			wantSource: downwardapi.PodNetworksAnnotation, wantField: "ip_addresses[0]", wantMessage: "not a unicast",
		},
		{
			name:       "hostile role",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{PodNetworks: podNetworks(t, `{"ns1/sriov-a":{"mac_address":"02:00:00:00:00:01","role":"primary\nsecondary"}}`)},
			wantSource: downwardapi.PodNetworksAnnotation, wantField: "role", wantMessage: "invalid role",
		},
		{
			name:       "a long hostile value is truncated in the message",
			vmi:        newVMI(bound("a", "sriov-a")),
			snap:       &downwardapi.Snapshot{NetworkStatus: statusWith(func(s *downwardapi.NetworkStatus) { s.DNS.Domain = strings.Repeat("x", 5000) + "\n" })},
			wantSource: downwardapi.NetworkStatusAnnotation, wantField: "dns.domain", wantMessage: "...(5001 bytes)",
		},
		{
			name:       "invalid MY_POD_IP",
			vmi:        newVMI(bound("a", "sriov-a")),
			podIP:      "not-an-ip",
			wantSource: model.SourcePodIPEnv, wantMessage: "invalid IP address",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.PodIP = tc.podIP
			got, err := model.Build(tc.vmi, tc.snap, o)
			require.Error(t, err)
			assert.Nil(t, got)
			var ie *model.InputError
			require.True(t, errors.As(err, &ie), "error %v is an *InputError", err)
			assert.Equal(t, tc.wantSource, ie.Source)
			assert.Equal(t, tc.wantField, ie.Field)
			assert.Contains(t, err.Error(), tc.wantMessage)
			if ie.Interface != "" {
				assert.Contains(t, err.Error(), "interface ")
			}
			assert.NotContains(t, err.Error(), "\n", "hostile values are quoted")
			assert.Less(t, len(err.Error()), 400, "hostile values are truncated")
			assert.NotNil(t, errors.Unwrap(err))
		})
	}
}

func TestBuild_SnapshotProblems_FailAtOnceWithTheirMessage(t *testing.T) {
	problem := errors.New(`k8s.ovn.org/pod-networks: invalid JSON`)
	_, err := model.Build(newVMI(bound("a", "sriov-a")), &downwardapi.Snapshot{Problems: []error{problem}}, opts())
	require.Error(t, err)
	assert.ErrorIs(t, err, problem)
	assert.True(t, strings.HasPrefix(err.Error(), "malformed downward API input"))
}

func TestBuild_EmptyBindingName_IsAnError(t *testing.T) {
	_, err := model.Build(newVMI(bound("a", "sriov-a")), nil, model.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BindingName")
}

func TestBuild_NilVMI_IsAnErrorNotAPanic(t *testing.T) {
	_, err := model.Build(nil, nil, opts())
	require.Error(t, err)
}
