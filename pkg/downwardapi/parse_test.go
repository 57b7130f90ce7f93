package downwardapi

import (
	"errors"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// formatMap writes the pod-info format the way kubelet's fieldpath.FormatMap does (sorted keys,
// strconv quoting, "\n"-joined, no trailing newline); test/downwardapi checks against the real one.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}

const networkInfoExample = `{"interfaces":[{"network":"sriov-vfio","deviceInfo":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:c4:02.5"}},"mac":"ea:6e:3a:8b:ed:27"}]}`

func TestParseNetworkInfo_ValidInput_ReturnsTypedData(t *testing.T) {
	info, err := ParseNetworkInfo("/etc/podinfo/network-info", []byte(networkInfoExample))
	require.NoError(t, err)
	require.NotNil(t, info)
	require.Len(t, info.Interfaces, 1)
	assert.Equal(t, "sriov-vfio", info.Interfaces[0].Network)
	assert.Equal(t, "0000:c4:02.5", info.Interfaces[0].DeviceInfo.Pci.PciAddress)
	assert.Equal(t, "ea:6e:3a:8b:ed:27", info.Interfaces[0].Mac)
}

// KubeVirt v1.9.0 adds "mtu" to each entry (pkg/network/downwardapi/types.go); v1.8 writes none, and an
// entry without mac or mtu (the CNI reported none) must parse to the zero values, not an error.
func TestParseNetworkInfo_V19MTUAndMAC_PresentOrAbsent(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantMAC string
		wantMTU int
	}{
		{"v1.9 entry", `{"interfaces":[{"network":"n1","mac":"02:00:00:00:20:08","mtu":9000}]}`, "02:00:00:00:20:08", 9000},
		{"v1.8 entry: mac, no mtu", `{"interfaces":[{"network":"n1","mac":"02:00:00:00:20:08"}]}`, "02:00:00:00:20:08", 0},
		{"neither", `{"interfaces":[{"network":"n1"}]}`, "", 0},
		{"mtu only", `{"interfaces":[{"network":"n1","mtu":1400}]}`, "", 1400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := ParseNetworkInfo("/etc/podinfo/network-info", []byte(tt.in))
			require.NoError(t, err)
			require.Len(t, info.Interfaces, 1)
			assert.Equal(t, tt.wantMAC, info.Interfaces[0].Mac)
			assert.Equal(t, tt.wantMTU, info.Interfaces[0].Mtu)
		})
	}
}

func TestParseNetworkInfo_EmptyOrWhitespace_MeansNotYet(t *testing.T) {
	for _, in := range []string{"", " ", "\n\t "} {
		info, err := ParseNetworkInfo("f", []byte(in))
		assert.NoError(t, err, "input %q", in)
		assert.Nil(t, info, "input %q", in)
	}
}

func TestParseNetworkInfo_BadInput_ErrorNamesSourceNetworkAndField(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"invalid JSON", `{"interfaces":[`, []string{"/p/network-info", "invalid JSON"}},
		{"trailing garbage", `{} x`, []string{"/p/network-info", "invalid JSON"}},
		{"bad MAC", `{"interfaces":[{"network":"n1","mac":"zz:00"}]}`, []string{"/p/network-info", `network "n1"`, "interfaces[0].mac", "invalid MAC"}},
		{"bad PCI address", `{"interfaces":[{"network":"n1","deviceInfo":{"type":"pci","pci":{"pci-address":"0000:65:00"}}}]}`, []string{`network "n1"`, "interfaces[0].deviceInfo.pci.pci-address"}},
		{"bad PCI function", `{"interfaces":[{"network":"n1","deviceInfo":{"type":"pci","pci":{"pci-address":"0000:65:00.8"}}}]}`, []string{"interfaces[0].deviceInfo.pci.pci-address"}},
		{"bad PF PCI address", `{"interfaces":[{"network":"n1","deviceInfo":{"pci":{"pf-pci-address":"x"}}}]}`, []string{"interfaces[0].deviceInfo.pci.pf-pci-address"}},
		{"negative MTU", `{"interfaces":[{"network":"n1","mtu":-1}]}`, []string{`network "n1"`, "interfaces[0].mtu", "out of range"}},
		{"MTU over 65535", `{"interfaces":[{"network":"n1","mtu":65536}]}`, []string{"interfaces[0].mtu", "out of range"}},
		{"MTU not a number", `{"interfaces":[{"network":"n1","mtu":"1500"}]}`, []string{"invalid JSON"}},
		{"empty network", `{"interfaces":[{"network":""}]}`, []string{"interfaces[0].network", "empty network name"}},
		{"duplicate network", `{"interfaces":[{"network":"a"},{"network":"a"}]}`, []string{`network "a"`, "interfaces[1].network", "duplicate"}},
		{"wrong type", `{"interfaces":{"network":"a"}}`, []string{"invalid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := ParseNetworkInfo("/p/network-info", []byte(tt.in))
			require.Error(t, err)
			assert.Nil(t, info)
			var fe *FieldError
			assert.True(t, errors.As(err, &fe), "error is a *FieldError")
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParsers_InputOverMaxFileSize_RejectedNamingSource(t *testing.T) {
	big := make([]byte, MaxFileSize+1)
	for i := range big {
		big[i] = ' '
	}
	_, err := ParseNetworkInfo("/etc/podinfo/network-info", big)
	assert.ErrorContains(t, err, "/etc/podinfo/network-info: larger than 1048576 bytes")
	_, err = ParseFormatMap("/pod/annotations", big)
	assert.ErrorContains(t, err, "/pod/annotations: larger than")
	_, err = ParseNetworkStatus(big)
	assert.ErrorContains(t, err, NetworkStatusAnnotation+": larger than")
	_, err = ParsePodNetworks(big)
	assert.ErrorContains(t, err, PodNetworksAnnotation+": larger than")
}

func TestParseFormatMap_KubeletFormat_RoundTrips(t *testing.T) {
	tests := []struct {
		name string
		m    map[string]string
	}{
		{"empty map is empty file", map[string]string{}},
		{"simple", map[string]string{"app": "vm", "kubevirt.io": "virt-launcher"}},
		{"quotes and backslashes", map[string]string{"a": `say "hi" \ \\ \"`}},
		{"newlines and tabs", map[string]string{"k8s.v1.cni.cncf.io/network-status": "[{\n    \"name\": \"x\"\n}]\t"}},
		{"unicode and control", map[string]string{"u": "héllo 世界 🚀 \u0000 \x7f \u200b", "bad-utf8": "\xff\xfe"}},
		{"equals in value", map[string]string{"k": "a=b=c", "e": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFormatMap("/pod/annotations", []byte(formatMap(tt.m)))
			require.NoError(t, err)
			assert.Equal(t, tt.m, got)
		})
	}
}

func TestParseFormatMap_BadInput_ErrorNamesFileLineAndKey(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"no equals", "a=\"1\"\nbroken", []string{"/pod/labels", "line 2", "no '='"}},
		{"unquoted value", `a=1`, []string{"line 1", `key "a"`, "not a double-quoted string"}},
		{"backquoted value", "a=`1`", []string{"line 1", "not a double-quoted string"}},
		{"unterminated quote", `a="1`, []string{"line 1", `key "a"`, "unquoting value"}},
		{"bad escape", `a="\q"`, []string{"line 1", "unquoting value"}},
		{"empty key", `="1"`, []string{"line 1", "empty key"}},
		{"duplicate key", "a=\"1\"\na=\"2\"", []string{"line 2", "duplicate key"}},
		{"empty line inside", "a=\"1\"\n\nb=\"2\"", []string{"line 2", "empty line"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseFormatMap("/pod/labels", []byte(tt.in))
			require.Error(t, err)
			assert.Nil(t, m)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseFormatMap_MalformedLine_ErrorNeverRepeatsTheValue(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	for name, in := range map[string]string{
		"no equals":          "a=\"1\"\n" + secret + "-rest",
		"unterminated quote": `k="` + secret,
		"bad escape":         `k="` + secret + `\q"`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFormatMap("/pod/annotations", []byte(in))
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret[:4])
			assert.Contains(t, err.Error(), "not shown")
		})
	}
}

func TestParseFormatMap_TrailingNewline_Tolerated(t *testing.T) {
	m, err := ParseFormatMap("f", []byte("a=\"1\"\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1"}, m)
}

const networkStatusExample = `[{"name":"ovn-kubernetes","interface":"eth0","ips":["10.244.0.3"],"mac":"0a:58:0a:f4:00:03","default":true,"dns":{}},
{"name":"ns1/sriov-net","interface":"pod16477688c0e","ips":["10.1.192.213","fd00::5"],"mac":"02:00:00:00:20:08","mtu":1500,
 "dns":{"nameservers":["10.96.0.10"],"search":["ns1.svc.cluster.local"]},"gateway":["10.1.192.1"],
 "device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2"}}}]`

func TestParseNetworkStatus_ValidInput_UsesNADClientTypes(t *testing.T) {
	st, err := ParseNetworkStatus([]byte(networkStatusExample))
	require.NoError(t, err)
	require.Len(t, st, 2)
	assert.Equal(t, NetworkStatus{
		Name: "ns1/sriov-net", Interface: "pod16477688c0e", IPs: []string{"10.1.192.213", "fd00::5"},
		Mac: "02:00:00:00:20:08", Mtu: 1500,
		DNS:        DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"ns1.svc.cluster.local"}},
		Gateway:    []string{"10.1.192.1"},
		DeviceInfo: &DeviceInfo{Type: "pci", Version: "1.1.0", Pci: &PciDevice{PciAddress: "0000:65:00.2"}},
	}, st[1])
}

func TestParseNetworkStatus_BadInput_ErrorNamesNetworkAndField(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"not a list", `{"name":"a"}`, []string{NetworkStatusAnnotation, "invalid JSON"}},
		{"bad ip", `[{"name":"ns/a","interface":"pod1","ips":["10.0.0.300"]}]`, []string{`network "ns/a"`, `interface "pod1"`, "field ips[0]", `invalid IP address "10.0.0.300"`}},
		{"ip with prefix", `[{"name":"ns/a","ips":["10.0.0.3/24"]}]`, []string{"field ips[0]"}},
		{"zone", `[{"name":"ns/a","ips":["fe80::1%eth0"]}]`, []string{"field ips[0]", "zone"}},
		{"bad mac", `[{"name":"ns/a","mac":"02:00"}]`, []string{"field mac", "invalid MAC"}},
		{"bad gateway", `[{"name":"ns/a","gateway":["10.0.0.1","x"]}]`, []string{"field gateway[1]"}},
		{"bad dns", `[{"name":"ns/a","dns":{"nameservers":["dns.example"]}}]`, []string{"field dns.nameservers[0]"}},
		{"bad pci", `[{"name":"ns/a","device-info":{"type":"pci","pci":{"pci-address":"65:00.2"}}}]`, []string{"field device-info.pci.pci-address"}},
		{"bad vdpa pci", `[{"name":"ns/a","device-info":{"type":"vdpa","vdpa":{"pci-address":"zz"}}}]`, []string{"field device-info.vdpa.pci-address"}},
		{"negative mtu", `[{"name":"ns/a","mtu":-1}]`, []string{"field mtu"}},
		{"empty name", `[{"name":""}]`, []string{"field name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The parser checks the document; the fields of an entry are checked when it is used
			// (CheckNetworkStatusEntry): entries that are not ours are not our business.
			st, err := ParseNetworkStatus([]byte(tt.in))
			if err == nil {
				require.Len(t, st, 1)
				err = CheckNetworkStatusEntry(0, st[0])
			} else {
				assert.Nil(t, st)
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

const podNetworksExample = `{"default":{"ip_addresses":["10.244.0.3/24"],"mac_address":"0a:58:0a:f4:00:03",
  "routes":[{"dest":"10.244.0.0/16","nextHop":"10.244.0.1"},{"dest":"100.64.0.0/16","nextHop":"10.244.0.1"}],
  "ip_address":"10.244.0.3/24","role":"infrastructure-locked"},
 "ns1/l2-primary":{"ip_addresses":["10.100.0.5/16","fd10:100::5/64"],"mac_address":"0a:58:0a:64:00:05",
  "gateway_ips":["10.100.0.1","fd10:100::1"],
  "routes":[{"dest":"10.96.0.0/16","nextHop":"10.100.0.1"},{"dest":"fd99::/64","nextHop":"fd10:100::1"}],
  "ipv6_lla_gateway_ip":"fe80::858:aff:fe64:1","tunnel_id":5,"role":"primary"},
 "default/ovn-localnet-dhcp-vfio":{"ip_addresses":null,"mac_address":"02:00:00:00:20:08","role":"secondary","ipam_mode":"dhcp"},
 "ns1/legacy":{"ip_address":"10.1.0.4/24","gateway_ip":"10.1.0.1","mac_address":"02:00:00:00:00:01"}}`

func TestParsePodNetworks_ValidInput_KeepsEveryField(t *testing.T) {
	pn, err := ParsePodNetworks([]byte(podNetworksExample))
	require.NoError(t, err)
	require.Len(t, pn, 4)

	assert.Equal(t, PodNetwork{
		IPAddresses:    []netip.Prefix{netip.MustParsePrefix("10.100.0.5/16"), netip.MustParsePrefix("fd10:100::5/64")},
		MAC:            netval.MAC{0x0a, 0x58, 0x0a, 0x64, 0x00, 0x05},
		Gateways:       []netip.Addr{netip.MustParseAddr("10.100.0.1"), netip.MustParseAddr("fd10:100::1")},
		Routes:         []PodRoute{{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParseAddr("10.100.0.1")}, {netip.MustParsePrefix("fd99::/64"), netip.MustParseAddr("fd10:100::1")}},
		IPv6LLAGateway: netip.MustParseAddr("fe80::858:aff:fe64:1"),
		TunnelID:       5,
		Role:           "primary",
	}, pn["ns1/l2-primary"])

	dhcp := pn["default/ovn-localnet-dhcp-vfio"]
	assert.Empty(t, dhcp.IPAddresses, "null ip_addresses is allowed")
	assert.Equal(t, "dhcp", dhcp.IPAMMode)
	assert.Equal(t, "secondary", dhcp.Role)

	legacy := pn["ns1/legacy"]
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.4/24")}, legacy.IPAddresses, "deprecated ip_address is used when ip_addresses is absent")
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.1.0.1")}, legacy.Gateways)
	assert.Equal(t, "infrastructure-locked", pn["default"].Role)
}

func TestParsePodNetworks_BadInput_ErrorNamesNetworkAndField(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"not an object", `[]`, []string{PodNetworksAnnotation, "invalid JSON"}},
		{"null entry", `{"a":null}`, []string{`network "a"`, "null entry"}},
		{"bad CIDR", `{"ns/a":{"ip_addresses":["10.0.0.5"],"mac_address":"02:00:00:00:00:01"}}`, []string{`network "ns/a"`, "field ip_addresses[0]", `invalid CIDR "10.0.0.5"`}},
		{"bad legacy CIDR", `{"ns/a":{"ip_address":"x","mac_address":"02:00:00:00:00:01"}}`, []string{"field ip_address:"}},
		{"missing mac", `{"ns/a":{"ip_addresses":null}}`, []string{"field mac_address"}},
		{"bad mac", `{"ns/a":{"mac_address":"0a:58"}}`, []string{"field mac_address", `invalid MAC "0a:58"`}},
		{"bad gateway", `{"ns/a":{"mac_address":"02:00:00:00:00:01","gateway_ips":["300.1.1.1"]}}`, []string{"field gateway_ips[0]"}},
		{"bad route dest", `{"ns/a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"x","nextHop":"10.0.0.1"}]}}`, []string{"field routes[0].dest"}},
		{"default route", `{"ns/a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"0.0.0.0/0","nextHop":"10.0.0.1"}]}}`, []string{"field routes[0].dest", "default route"}},
		{"bad next hop", `{"ns/a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"10.0.0.0/8","nextHop":"q"}]}}`, []string{"field routes[0].nextHop"}},
		{"family mismatch", `{"ns/a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"10.0.0.0/8","nextHop":"fd00::1"}]}}`, []string{"field routes[0].nextHop", "family"}},
		{"lla not v6", `{"ns/a":{"mac_address":"02:00:00:00:00:01","ipv6_lla_gateway_ip":"10.0.0.1"}}`, []string{"field ipv6_lla_gateway_ip"}},
		{"hostile long key", `{"` + strings.Repeat("x", 500) + `":{"mac_address":"bad"}}`, []string{"...(500 bytes)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pn, err := ParsePodNetworks([]byte(tt.in))
			require.Error(t, err)
			assert.Nil(t, pn)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestSnapshotFromMaps_ParsesAnnotationsAndReportsProblems(t *testing.T) {
	labels := map[string]string{"kubevirt.io": "virt-launcher"}
	annotations := map[string]string{
		NetworkInfoAnnotation:   networkInfoExample,
		NetworkStatusAnnotation: networkStatusExample,
		PodNetworksAnnotation:   `{"ns/a":{"mac_address":"nope"}}`,
	}
	s := SnapshotFromMaps(labels, annotations)
	annotations["mutated"] = "after"

	assert.True(t, s.PodInfo)
	assert.Equal(t, labels, s.Labels)
	assert.NotContains(t, s.Annotations, "mutated", "maps are copied")
	require.NotNil(t, s.NetworkInfo)
	assert.Equal(t, "sriov-vfio", s.NetworkInfo.Interfaces[0].Network)
	assert.Len(t, s.NetworkStatus, 2)
	assert.Nil(t, s.PodNetworks, "a bad annotation leaves its typed field nil")
	require.Len(t, s.Problems, 1)
	assert.ErrorContains(t, s.Problems[0], `pod annotations: k8s.ovn.org/pod-networks: network "ns/a": field mac_address`)
}

func TestSnapshotFromMaps_NilMaps_EmptyNotNil(t *testing.T) {
	s := SnapshotFromMaps(nil, nil)
	assert.True(t, s.PodInfo)
	assert.NotNil(t, s.Labels)
	assert.NotNil(t, s.Annotations)
	assert.Empty(t, s.Problems)
}

func TestMissingError_ListsEveryItemOnItsOwnLine(t *testing.T) {
	err := &MissingError{
		Items: []Missing{
			{Interface: "sriov1", Network: "net1", Source: "/etc/podinfo/network-info", Field: "deviceInfo.pci.pci-address"},
			{Interface: "sriov2", Source: PodNetworksAnnotation, Field: "ip_addresses"},
			{Network: "net3", Source: NetworkStatusAnnotation},
			{Source: "/pod/annotations"},
		},
		Problems: []error{errors.New("boom")},
		Err:      errors.New("context deadline exceeded"),
	}
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 6)
	assert.Contains(t, lines[0], "context deadline exceeded")
	assert.Contains(t, lines[0], "4 item(s)")
	assert.Equal(t, "  interface sriov1 (network net1): /etc/podinfo/network-info deviceInfo.pci.pci-address", lines[1])
	assert.Equal(t, "  interface sriov2: k8s.ovn.org/pod-networks ip_addresses", lines[2])
	assert.Equal(t, "  network net3: k8s.v1.cni.cncf.io/network-status", lines[3])
	assert.Equal(t, "  /pod/annotations", lines[4])
	assert.Equal(t, "  problem: boom", lines[5])
	assert.Equal(t, "context deadline exceeded", errors.Unwrap(err).Error())
}
