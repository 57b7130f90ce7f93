package downwardapi_test

import (
	"encoding/json"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// The sidecar mirrors the NAD client's network-status types to stay lean (pkg/downwardapi/nad.go).
// Decoding the same annotation with both and marshalling both back must give the same bytes: the
// mirror neither drops nor renames a field.
func TestNetworkStatusMirror_DecodesAndEncodesLikeTheNADClientTypes(t *testing.T) {
	docs := map[string]string{
		"sriov pci with dns and gateway": `[{"name":"ns/sriov","interface":"podc034fb9b007","ips":["10.0.0.5","fd00::5"],"mac":"02:00:00:aa:01:01","mtu":1400,"default":false,"dns":{"nameservers":["10.0.0.2"],"domain":"example.internal","search":["a.example"],"options":["ndots:2"]},"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2","vhost-net":"/dev/vhost-net","rdma-device":"mlx5_3","pf-pci-address":"0000:65:00.0","representor-device":"eth5"}},"gateway":["10.0.0.1"]}]`,
		"default network":                `[{"name":"ovn-kubernetes","interface":"eth0","ips":["10.244.1.12"],"mac":"0a:58:0a:f4:01:0c","default":true,"dns":{}}]`,
		"vdpa":                           `[{"name":"ns/v","interface":"pod1","device-info":{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa:0000:65:00.3","driver":"vhost","path":"/dev/vhost-vdpa-1","pci-address":"0000:65:00.3","pf-pci-address":"0000:65:00.0","representor-device":"eth7"}}}]`,
		"vhost-user and memif":           `[{"name":"ns/u","device-info":{"type":"vhost-user","vhost-user":{"mode":"client","path":"/var/run/a.sock"}}},{"name":"ns/m","device-info":{"type":"memif","memif":{"role":"master","path":"/run/m.sock","mode":"ethernet"}}}]`,
		"unknown fields ignored by both": `[{"name":"ns/x","extra":{"a":1},"device-info":{"type":"pci","pci":{"pci-address":"0000:00:01.0","future":"x"}}}]`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			var theirs []nadv1.NetworkStatus
			require.NoError(t, json.Unmarshal([]byte(doc), &theirs))
			ours, err := downwardapi.ParseNetworkStatus([]byte(doc))
			require.NoError(t, err)
			theirJSON, err := json.Marshal(theirs)
			require.NoError(t, err)
			ourJSON, err := json.Marshal(ours)
			require.NoError(t, err)
			assert.JSONEq(t, string(theirJSON), string(ourJSON))
			assert.Equal(t, string(theirJSON), string(ourJSON), "same fields in the same order")
		})
	}
}
