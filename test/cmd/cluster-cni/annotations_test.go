package main

import (
	"encoding/json"
	"net"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

func intp(i int) *int { return &i }

// bridgeResult is what the bridge plugin returns for eth0 (host-side bridge and veth, then the sandbox
// interface at index 2), dual-stack unless v6 is "".
func bridgeResult(v4, v6 string) *Result {
	r := &Result{
		CNIVersion: cniVersion,
		Interfaces: []ResultIface{
			{Name: "cni0", Mac: "aa:aa:aa:aa:aa:01"},
			{Name: "veth1234", Mac: "aa:aa:aa:aa:aa:02"},
			{Name: "eth0", Mac: "0a:58:0a:f4:00:05", Sandbox: "/var/run/netns/pod"},
		},
		IPs:    []ResultIP{{Interface: intp(2), Address: v4 + "/24", Gateway: "10.244.0.1"}},
		Routes: []ResultRoute{{Dst: "0.0.0.0/0", GW: "10.244.0.1"}},
	}
	if v6 != "" {
		r.IPs = append(r.IPs, ResultIP{Interface: intp(2), Address: v6 + "/64", Gateway: "fd00:10:244::1"})
		r.Routes = append(r.Routes, ResultRoute{Dst: "::/0", GW: "fd00:10:244::1"})
	}
	return r
}

// ipamResult is what host-local returns: no interfaces, addresses without an interface index.
func ipamResult(addrs ...string) *Result {
	r := &Result{CNIVersion: cniVersion}
	for _, a := range addrs {
		r.IPs = append(r.IPs, ResultIP{Address: a})
	}
	return r
}

func sriovAttachment(network, ns, nad, mac string, res *Result) Attachment {
	return Attachment{
		Selection: nadv1.NetworkSelectionElement{Name: nad, Namespace: ns, InterfaceRequest: hashedPodIfaceName(network)},
		NAD:       NADConfig{Name: nad, Type: typeSRIOV, DeviceID: "0000:65:00.2"},
		PodIface:  hashedPodIfaceName(network),
		MAC:       mac,
		Result:    res,
	}
}

func testPod(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "virt-launcher-vm1-abcde", Labels: labels}}
}

func testPodNetwork() PodNetworkConfig {
	return PodNetworkConfig{Bridge: "cni0", SubnetV4: "10.244.0.0/24", SubnetV6: "fd00:10:244::/64", ServiceSubnets: []string{"10.96.0.0/16", "fd00:10:96::/112"}}
}

func TestBuildAnnotations_ParseWithTheSidecarsParsers(t *testing.T) {
	podIface := hashedPodIfaceName("sriov1")
	type wantStatus struct {
		name, iface, mac string
		ips, gateways    []string
		pci              string
		isDefault        bool
		mtu              int
	}
	type wantPN struct {
		key, role, mac string
		ips, gateways  []string
		routes         int
	}
	tests := []struct {
		name       string
		atts       []Attachment
		def        *Result
		wantStatus []wantStatus
		wantPN     []wantPN
	}{
		{
			name: "one SR-IOV UDN, dual-stack",
			def:  bridgeResult("10.244.0.5", "fd00:10:244::5"),
			atts: []Attachment{sriovAttachment("sriov1", "ns1", "l2net", "02:00:00:00:00:01", ipamResult("192.168.10.2/24", "fd10::2/64"))},
			wantStatus: []wantStatus{
				{name: "pods", iface: "eth0", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.5", "fd00:10:244::5"}, gateways: []string{"10.244.0.1", "fd00:10:244::1"}, isDefault: true},
				{name: "ns1/l2net", iface: podIface, mac: "02:00:00:00:00:01", ips: []string{"192.168.10.2", "fd10::2"}, pci: "0000:65:00.2"},
			},
			wantPN: []wantPN{
				// cluster subnet, service subnet, hairpin, join: 4 per family
				{key: "default", role: "primary", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.5/24", "fd00:10:244::5/64"}, gateways: []string{"10.244.0.1", "fd00:10:244::1"}, routes: 8},
				{key: "ns1/l2net", role: "secondary", mac: "02:00:00:00:00:01", ips: []string{"192.168.10.2/24", "fd10::2/64"}},
			},
		},
		{
			name: "SR-IOV UDN without IPAM and a none network (left out of network-status)",
			def:  bridgeResult("10.244.0.6", "fd00:10:244::6"),
			atts: []Attachment{
				func() Attachment {
					a := sriovAttachment("sriov1", "ns1", "l2net", "02:00:00:00:00:02", nil)
					a.NAD.MTU = 1400
					return a
				}(),
				{Selection: nadv1.NetworkSelectionElement{Name: "dummy", Namespace: "ns2", InterfaceRequest: hashedPodIfaceName("other")},
					NAD: NADConfig{Name: "dummy", Type: typeNone}, PodIface: hashedPodIfaceName("other")},
			},
			wantStatus: []wantStatus{
				{name: "pods", iface: "eth0", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.6", "fd00:10:244::6"}, gateways: []string{"10.244.0.1", "fd00:10:244::1"}, isDefault: true},
				{name: "ns1/l2net", iface: podIface, mac: "02:00:00:00:00:02", pci: "0000:65:00.2", mtu: 1400},
			},
			wantPN: []wantPN{
				{key: "default", role: "primary", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.6/24", "fd00:10:244::6/64"}, gateways: []string{"10.244.0.1", "fd00:10:244::1"}, routes: 8},
				{key: "ns1/l2net", role: "secondary", mac: "02:00:00:00:00:02"},
			},
		},
		{
			name: "primary UDN: the cluster network is infrastructure-locked",
			def:  bridgeResult("10.244.0.7", ""),
			atts: func() []Attachment {
				a := sriovAttachment("sriov1", "ns1", "prim", "02:00:00:00:00:03", &Result{CNIVersion: cniVersion, IPs: []ResultIP{{Address: "192.168.20.2/24", Gateway: "192.168.20.1"}}})
				a.NAD.Role = rolePrimary
				return []Attachment{a}
			}(),
			wantStatus: []wantStatus{
				{name: "pods", iface: "eth0", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.7"}, gateways: []string{"10.244.0.1"}, isDefault: true},
				{name: "ns1/prim", iface: podIface, mac: "02:00:00:00:00:03", ips: []string{"192.168.20.2"}, pci: "0000:65:00.2"},
			},
			wantPN: []wantPN{
				{key: "default", role: "infrastructure-locked", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.7/24"}, routes: 2},
				{key: "ns1/prim", role: "primary", mac: "02:00:00:00:00:03", ips: []string{"192.168.20.2/24"}, gateways: []string{"192.168.20.1"}, routes: 2},
			},
		},
		{
			name: "default-route requested on the UDN: the cluster network keeps no IPv4 gateway",
			def:  bridgeResult("10.244.0.8", "fd00:10:244::8"),
			atts: func() []Attachment {
				a := sriovAttachment("sriov1", "ns1", "l2net", "02:00:00:00:00:04", &Result{CNIVersion: cniVersion,
					IPs:    []ResultIP{{Address: "192.168.10.4/24"}},
					Routes: []ResultRoute{{Dst: "0.0.0.0/0", GW: "192.168.10.1"}, {Dst: "172.16.0.0/12", GW: "192.168.10.254"}}})
				a.Selection.GatewayRequest = []net.IP{net.IPv4(192, 168, 10, 1)}
				return []Attachment{a}
			}(),
			wantStatus: []wantStatus{
				{name: "pods", iface: "eth0", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.8", "fd00:10:244::8"}, gateways: []string{"10.244.0.1", "fd00:10:244::1"}, isDefault: true},
				{name: "ns1/l2net", iface: podIface, mac: "02:00:00:00:00:04", ips: []string{"192.168.10.4"}, gateways: []string{"192.168.10.1"}, pci: "0000:65:00.2"},
			},
			wantPN: []wantPN{
				{key: "default", role: "primary", mac: "0a:58:0a:f4:00:05", ips: []string{"10.244.0.8/24", "fd00:10:244::8/64"}, gateways: []string{"fd00:10:244::1"}, routes: 8},
				{key: "ns1/l2net", role: "secondary", mac: "02:00:00:00:00:04", ips: []string{"192.168.10.4/24"}, gateways: []string{"192.168.10.1"}, routes: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann, err := BuildAnnotations(AnnotationInput{
				Pod: testPod(nil), DefaultNetwork: "pods", PodIfName: "eth0", PodNetwork: testPodNetwork(),
				Default: tt.def, Attachments: tt.atts,
			})
			require.NoError(t, err)
			require.Len(t, ann, 2)

			// network-status, with the sidecar's parser and entry check...
			statuses, err := downwardapi.ParseNetworkStatus([]byte(ann[NetworkStatusAnnotation]))
			require.NoError(t, err)
			require.Len(t, statuses, len(tt.wantStatus))
			for i, w := range tt.wantStatus {
				st := statuses[i]
				require.Nil(t, downwardapi.CheckNetworkStatusEntry(i, st), "entry %d", i)
				assert.Equal(t, w.name, st.Name, "entry %d name", i)
				assert.Equal(t, w.iface, st.Interface, "entry %d interface", i)
				assert.Equal(t, w.mac, st.Mac, "entry %d mac", i)
				assert.Equal(t, w.ips, nilIfEmpty(st.IPs), "entry %d ips", i)
				assert.Equal(t, w.gateways, st.Gateway, "entry %d gateway", i)
				assert.Equal(t, w.isDefault, st.Default, "entry %d default", i)
				assert.Equal(t, w.mtu, st.Mtu, "entry %d mtu", i)
				if w.pci == "" {
					assert.Nil(t, st.DeviceInfo, "entry %d device-info", i)
				} else {
					require.NotNil(t, st.DeviceInfo, "entry %d device-info", i)
					assert.Equal(t, downwardapi.DeviceInfo{Type: "pci", Version: "1.1.0", Pci: &downwardapi.PciDevice{PciAddress: w.pci}}, *st.DeviceInfo)
				}
			}
			// ...and with the NAD client's own type, to the same values.
			var nadStatuses []nadv1.NetworkStatus
			require.NoError(t, json.Unmarshal([]byte(ann[NetworkStatusAnnotation]), &nadStatuses))
			require.Len(t, nadStatuses, len(statuses))
			for i := range nadStatuses {
				assert.Equal(t, statuses[i].Name, nadStatuses[i].Name)
				assert.Equal(t, statuses[i].IPs, nadStatuses[i].IPs)
				assert.Equal(t, statuses[i].Mac, nadStatuses[i].Mac)
				assert.Equal(t, statuses[i].Interface, nadStatuses[i].Interface)
				assert.Equal(t, statuses[i].DeviceInfo != nil, nadStatuses[i].DeviceInfo != nil)
			}

			// pod-networks, with the sidecar's parser (OVN-K's rules).
			pn, err := downwardapi.ParsePodNetworks([]byte(ann[PodNetworksAnnotation]))
			require.NoError(t, err)
			require.Len(t, pn, len(tt.wantPN))
			for _, w := range tt.wantPN {
				got, ok := pn[w.key]
				require.True(t, ok, "pod-networks key %s in %s", w.key, ann[PodNetworksAnnotation])
				assert.Equal(t, w.role, got.Role, "%s role", w.key)
				assert.Equal(t, w.mac, got.MAC.String(), "%s mac", w.key)
				var ips, gws []string
				for _, p := range got.IPAddresses {
					ips = append(ips, p.String())
				}
				for _, g := range got.Gateways {
					gws = append(gws, g.String())
				}
				assert.Equal(t, w.ips, ips, "%s ip_addresses", w.key)
				assert.Equal(t, w.gateways, gws, "%s gateway_ips", w.key)
				assert.Len(t, got.Routes, w.routes, "%s routes", w.key)
			}

			// The whole pod, as the sidecar's render subcommand and watcher see it: no problem reported.
			snap := downwardapi.SnapshotFromMaps(nil, ann)
			assert.Empty(t, snap.Problems)
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// The raw JSON has OVN-K's shape (MarshalPodAnnotation): ip_addresses and mac_address always present
// (null without IPAM), the legacy ip_address/gateway_ip on single-stack networks only; and Multus' shape
// for network-status ("dns": {} always, device-info only for SR-IOV).
func TestBuildAnnotations_RawJSONHasTheUpstreamShape(t *testing.T) {
	ann, err := BuildAnnotations(AnnotationInput{
		Pod: testPod(nil), DefaultNetwork: "pods", PodIfName: "eth0",
		PodNetwork: PodNetworkConfig{Bridge: "cni0", SubnetV4: "10.244.0.0/24", SubnetV6: "fd00:10:244::/64"},
		Default:    bridgeResult("10.244.0.5", ""),
		Attachments: []Attachment{
			sriovAttachment("sriov1", "ns1", "l2net", "02:00:00:00:00:01", nil),
			sriovAttachment("sriov2", "ns1", "l2dual", "02:00:00:00:00:02", ipamResult("192.168.10.2/24", "fd10::2/64")),
		},
	})
	require.NoError(t, err)
	var pn map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(ann[PodNetworksAnnotation]), &pn))
	assert.Equal(t, map[string]any{
		"ip_addresses": []any{"10.244.0.5/24"}, "mac_address": "0a:58:0a:f4:00:05", "gateway_ips": []any{"10.244.0.1"},
		"ip_address": "10.244.0.5/24", "gateway_ip": "10.244.0.1", "role": "primary",
		"routes": []any{
			map[string]any{"dest": "10.244.0.0/24", "nextHop": "10.244.0.1"},
			map[string]any{"dest": "169.254.0.5/32", "nextHop": "10.244.0.1"},
			map[string]any{"dest": "100.64.0.0/16", "nextHop": "10.244.0.1"},
		},
	}, pn["default"])
	assert.Equal(t, map[string]any{"ip_addresses": nil, "mac_address": "02:00:00:00:00:01", "role": "secondary"}, pn["ns1/l2net"])
	assert.Equal(t, map[string]any{"ip_addresses": []any{"192.168.10.2/24", "fd10::2/64"}, "mac_address": "02:00:00:00:00:02", "role": "secondary"}, pn["ns1/l2dual"])

	var ns []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ann[NetworkStatusAnnotation]), &ns))
	require.Len(t, ns, 3)
	assert.Equal(t, map[string]any{"name": "pods", "interface": "eth0", "ips": []any{"10.244.0.5"}, "mac": "0a:58:0a:f4:00:05",
		"default": true, "dns": map[string]any{}, "gateway": []any{"10.244.0.1"}}, ns[0])
	assert.Equal(t, map[string]any{"name": "ns1/l2net", "interface": hashedPodIfaceName("sriov1"), "mac": "02:00:00:00:00:01",
		"dns": map[string]any{}, "device-info": map[string]any{"type": "pci", "version": "1.1.0", "pci": map[string]any{"pci-address": "0000:65:00.2"}}}, ns[1])
}

func TestBuildAnnotations_MalformedLabel_NetworkStatusFailsOurParserNamingIt(t *testing.T) {
	tests := []struct {
		name      string
		labels    map[string]string
		malformed bool
	}{
		{"label malformed", map[string]string{MalformedLabel: MalformedLabelValue}, true},
		{"label with another value", map[string]string{MalformedLabel: "valid"}, false},
		{"no label", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann, err := BuildAnnotations(AnnotationInput{
				Pod: testPod(tt.labels), DefaultNetwork: "pods", PodIfName: "eth0", PodNetwork: testPodNetwork(),
				Default:     bridgeResult("10.244.0.5", "fd00:10:244::5"),
				Attachments: []Attachment{sriovAttachment("sriov1", "ns1", "l2net", "02:00:00:00:00:01", ipamResult("192.168.10.2/24"))},
			})
			require.NoError(t, err)
			_, perr := downwardapi.ParsePodNetworks([]byte(ann[PodNetworksAnnotation]))
			require.NoError(t, perr, "pod-networks stays valid")
			_, err = downwardapi.ParseNetworkStatus([]byte(ann[NetworkStatusAnnotation]))
			snap := downwardapi.SnapshotFromMaps(tt.labels, ann)
			if !tt.malformed {
				require.NoError(t, err)
				assert.Empty(t, snap.Problems)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), downwardapi.NetworkStatusAnnotation)
			assert.False(t, json.Valid([]byte(ann[NetworkStatusAnnotation])))
			require.Len(t, snap.Problems, 1)
			assert.Contains(t, snap.Problems[0].Error(), downwardapi.NetworkStatusAnnotation)
		})
	}
}

func TestBuildAnnotations_BadInput_ErrorNamesWhat(t *testing.T) {
	good := func() AnnotationInput {
		return AnnotationInput{Pod: testPod(nil), DefaultNetwork: "pods", PodIfName: "eth0", PodNetwork: testPodNetwork(),
			Default: bridgeResult("10.244.0.5", "")}
	}
	tests := []struct {
		name   string
		mutate func(*AnnotationInput)
		want   string
	}{
		{"no pod", func(in *AnnotationInput) { in.Pod = nil }, "pod and pod-network result are required"},
		{"no sandbox interface", func(in *AnnotationInput) { in.PodIfName = "eth1" }, "no sandbox interface eth1"},
		{"bad address", func(in *AnnotationInput) { in.Default.IPs[0].Address = "10.244.0.5" }, `pod-network result address "10.244.0.5"`},
		{"bad UDN address", func(in *AnnotationInput) {
			in.Attachments = []Attachment{sriovAttachment("s", "ns1", "l2net", "02:00:00:00:00:01", ipamResult("nope"))}
		}, `network ns1/l2net result address "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good()
			tt.mutate(&in)
			_, err := BuildAnnotations(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
