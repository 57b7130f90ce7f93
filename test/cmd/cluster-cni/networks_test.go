package main

import (
	"net"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/network/namescheme"
)

func TestNames_MatchKubeVirtNamescheme(t *testing.T) {
	for _, network := range []string{"sriov1", "red", "a-very-long-network-name-of-sixty-three-characters-xxxxxxxxxxxxxx"} {
		t.Run(network, func(t *testing.T) {
			iface := hashedPodIfaceName(network)
			assert.Equal(t, namescheme.GenerateHashedInterfaceName(network), iface)
			tap := tapName(iface)
			assert.Len(t, tap, 13)
			assert.Equal(t, "vf"+namescheme.GenerateHashedInterfaceName(iface)[len("pod"):], tap)
			require.NoError(t, checkIfName(tap))
		})
	}
}

func TestParseNetworkSelections(t *testing.T) {
	tests := []struct {
		name, value string
		want        []nadv1.NetworkSelectionElement
		wantErr     string
	}{
		{name: "empty", value: "  "},
		{
			name:  "JSON list as KubeVirt writes it",
			value: `[{"name":"l2net","namespace":"ns2","interface":"pod16477688c0e","mac":"02:00:00:00:00:01"},{"name":"dummy","interface":"podabc"}]`,
			want: []nadv1.NetworkSelectionElement{
				{Name: "l2net", Namespace: "ns2", InterfaceRequest: "pod16477688c0e", MacRequest: "02:00:00:00:00:01"},
				{Name: "dummy", Namespace: "ns1", InterfaceRequest: "podabc"},
			},
		},
		{
			name:  "JSON with default-route",
			value: `[{"name":"l2net","default-route":["192.168.10.1"]}]`,
			want:  []nadv1.NetworkSelectionElement{{Name: "l2net", Namespace: "ns1", GatewayRequest: []net.IP{net.ParseIP("192.168.10.1")}}},
		},
		{
			name:  "short comma form",
			value: "l2net, ns2/dummy@net7 ,ns3/other",
			want: []nadv1.NetworkSelectionElement{
				{Name: "l2net", Namespace: "ns1"},
				{Name: "dummy", Namespace: "ns2", InterfaceRequest: "net7"},
				{Name: "other", Namespace: "ns3"},
			},
		},
		{name: "bad JSON", value: `[{"name":`, wantErr: "annotation k8s.v1.cni.cncf.io/networks: invalid JSON"},
		{name: "JSON entry without name", value: `[{"namespace":"ns1"}]`, wantErr: "entry 0 has no name"},
		{name: "JSON interface too long", value: `[{"name":"a","interface":"abcdefghijklmnop"}]`, wantErr: "entry 0 (ns1/a) interface"},
		{name: "two slashes", value: "a/b/c", wantErr: `item 0 "a/b/c": more than one '/'`},
		{name: "two ats", value: "ok,a@b@c", wantErr: `item 1 "a@b@c": more than one '@'`},
		{name: "upper case", value: "Net", wantErr: `"Net" is not a DNS-1123 label`},
		{name: "empty item", value: "a,,b", wantErr: "entry 1 has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNetworkSelections(tt.value, "ns1")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseNADConfig(t *testing.T) {
	tests := []struct {
		name, config string
		want         NADConfig
		wantErr      string
	}{
		{
			name:   "sriov with host-local",
			config: `{"cniVersion":"1.0.0","name":"l2net","type":"sriov","deviceID":"0000:65:00.2","ipam":{"type":"host-local","subnet":"192.168.10.0/24"}}`,
			want:   NADConfig{Name: "l2net", Type: "sriov", DeviceID: "0000:65:00.2", IPAM: []byte(`{"type":"host-local","subnet":"192.168.10.0/24"}`)},
		},
		{
			name:   "conflist: the first plugin decides",
			config: `{"cniVersion":"1.0.0","name":"l2net","plugins":[{"type":"sriov","deviceID":"0000:65:00.3","role":"primary"},{"type":"tuning"}]}`,
			want:   NADConfig{Name: "l2net", Type: "sriov", DeviceID: "0000:65:00.3", Role: "primary"},
		},
		{
			name:   "sriov with the VF's mtu",
			config: `{"cniVersion":"1.0.0","name":"l2net","type":"sriov","deviceID":"0000:65:00.2","mtu":1400}`,
			want:   NADConfig{Name: "l2net", Type: "sriov", DeviceID: "0000:65:00.2", MTU: 1400},
		},
		{
			name:   "bridge, layer 2 with an mtu",
			config: `{"cniVersion":"1.0.0","name":"br","type":"bridge","bridge":"br-hot","mtu":1450}`,
			want:   NADConfig{Name: "br", Type: "bridge", Bridge: "br-hot", MTU: 1450},
		},
		{name: "bridge without a bridge", config: `{"type":"bridge"}`, wantErr: "bridge: "},
		{name: "bridge with ipam", config: `{"type":"bridge","bridge":"br0","ipam":{"type":"host-local"}}`, wantErr: "layer 2 only"},
		{name: "none, no name", config: `{"type":"none","ipam":{}}`, want: NADConfig{Name: "nad1", Type: "none"}},
		{name: "mtu too small", config: `{"type":"sriov","deviceID":"0000:65:00.2","mtu":67}`, wantErr: "mtu 67 is outside 68-65535"},
		{name: "mtu too large", config: `{"type":"sriov","deviceID":"0000:65:00.2","mtu":65536}`, wantErr: "mtu 65536"},
		{name: "bad JSON", config: `{`, wantErr: "NetworkAttachmentDefinition ns1/nad1 spec.config: invalid JSON"},
		{name: "no type", config: `{"name":"x"}`, wantErr: "type is empty"},
		{name: "sriov without deviceID", config: `{"type":"sriov"}`, wantErr: "deviceID"},
		{name: "sriov bad deviceID", config: `{"type":"sriov","deviceID":"65:00.2x"}`, wantErr: "deviceID"},
		{name: "bad role", config: `{"type":"sriov","deviceID":"0000:65:00.2","role":"tertiary"}`, wantErr: `role "tertiary"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNADConfig("ns1", "nad1", tt.config)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.Name, got.Name)
			assert.Equal(t, tt.want.Type, got.Type)
			assert.Equal(t, tt.want.DeviceID, got.DeviceID)
			assert.Equal(t, tt.want.Bridge, got.Bridge)
			assert.Equal(t, tt.want.Role, got.Role)
			assert.Equal(t, tt.want.MTU, got.MTU)
			assert.Equal(t, string(tt.want.IPAM), string(got.IPAM))
		})
	}
}
