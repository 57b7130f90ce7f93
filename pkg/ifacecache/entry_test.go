package ifacecache

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func bound(name string, addrs ...string) model.BoundInterface {
	return model.BoundInterface{Name: name, Network: name + "-net", Addresses: prefixes(addrs...)}
}

func TestBuildEntries_PodIPsFollowKubeVirtRules(t *testing.T) {
	kvSpec := []kvv1.Interface{{
		Name:       "net1",
		MacAddress: "02:00:00:00:00:01",
		Binding:    &kvv1.PluginBinding{Name: "sriov-udn"},
	}}
	tests := []struct {
		name    string
		iface   model.BoundInterface
		primary model.Family
		want    []string // nil: no entry
	}{
		{"IPv4 only", bound("net1", "10.66.10.77/24"), model.IPv4, []string{"10.66.10.77"}},
		{"IPv6 only", bound("net1", "fd00:10:66::77/64"), model.IPv4, []string{"fd00:10:66::77"}},
		{"dual stack, IPv4 primary", bound("net1", "fd00:10:66::77/64", "10.66.10.77/24"), model.IPv4,
			[]string{"10.66.10.77", "fd00:10:66::77"}},
		{"dual stack, IPv6 primary", bound("net1", "10.66.10.77/24", "fd00:10:66::77/64"), model.IPv6,
			[]string{"fd00:10:66::77", "10.66.10.77"}},
		{"zero family means IPv4 primary", bound("net1", "fd00::1/64", "10.0.0.1/8"), 0, []string{"10.0.0.1", "fd00::1"}},
		{"first global unicast of each family only", bound("net1", "10.0.0.1/8", "10.0.0.2/8", "2001:db8::1/64", "2001:db8::2/64"),
			model.IPv4, []string{"10.0.0.1", "2001:db8::1"}},
		{"link-local skipped", bound("net1", "fe80::1/64", "169.254.0.5/16", "10.0.0.1/8"), model.IPv6, []string{"10.0.0.1"}},
		{"IPv4-mapped IPv6 written as IPv4", bound("net1", "::ffff:10.0.0.9/120"), model.IPv4, []string{"10.0.0.9"}},
		{"link-local only: no entry", bound("net1", "fe80::1/64"), model.IPv4, nil},
		{"no addresses (DHCP): no entry", model.BoundInterface{Name: "net1", DHCP: true}, model.IPv4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := BuildEntries(specs(t, kvSpec...), []model.BoundInterface{tt.iface}, tt.primary)
			require.NoError(t, err)
			if tt.want == nil {
				assert.Empty(t, entries)
				return
			}
			require.Len(t, entries, 1)
			assert.Equal(t, "net1", entries[0].Name)
			assert.Equal(t, tt.want, entries[0].Data.PodIPs)
			assert.Equal(t, tt.want[0], entries[0].Data.PodIP)
			require.NotNil(t, entries[0].Data.Iface)
			assert.Equal(t, kvSpec[0], ifaceOf(t, entries[0].Data), "iface is the VMI's interface spec, as virt-handler writes it")
		})
	}
}

func TestBuildEntries_InterfaceMissingFromSpec_CarriesItsName(t *testing.T) {
	entries, err := BuildEntries(nil, []model.BoundInterface{bound("net2", "10.0.0.2/8")}, model.IPv4)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, kvv1.Interface{Name: "net2"}, ifaceOf(t, entries[0].Data))
}

func TestBuildEntries_InvalidOrDuplicateName_ErrorNamesItAndOthersAreKept(t *testing.T) {
	entries, err := BuildEntries(nil, []model.BoundInterface{
		bound("../x", "10.0.0.1/8"),
		bound("net1", "10.0.0.2/8"),
		bound("net1", "10.0.0.3/8"),
	}, model.IPv4)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidName)
	assert.Contains(t, err.Error(), `"../x"`)
	assert.Contains(t, err.Error(), `interface "net1" is bound twice`)
	require.Len(t, entries, 1)
	assert.Equal(t, "net1", entries[0].Name)
	assert.Equal(t, []string{"10.0.0.2"}, entries[0].Data.PodIPs)
}

func TestEntryEncode_MatchesKubeVirtWriterFormat(t *testing.T) {
	// KubeVirt's writeToCachedFile (pkg/network/cache/cache.go) uses json.MarshalIndent with two
	// spaces; networkState is omitted when zero.
	data, err := Entry{Name: "net1", Data: PodIfaceCacheData{
		Iface: mustJSON(t, kvv1.Interface{Name: "net1"}), PodIP: "10.0.0.1", PodIPs: []string{"10.0.0.1", "fd00::1"},
	}}.Encode()
	require.NoError(t, err)
	assert.Equal(t, `{
  "iface": {
    "name": "net1"
  },
  "podIP": "10.0.0.1",
  "podIPs": [
    "10.0.0.1",
    "fd00::1"
  ]
}`, string(data))
}

// specs turns KubeVirt's own interface specs into ours the way the sidecar gets them: marshalled by
// virt-launcher, decoded by model.DecodeVMI's types.
func specs(t testing.TB, in ...kvv1.Interface) []model.Interface {
	t.Helper()
	out := make([]model.Interface, len(in))
	for i, kv := range in {
		require.NoError(t, json.Unmarshal(mustJSON(t, kv), &out[i]))
	}
	return out
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

// ifaceOf decodes an entry's iface with KubeVirt's own type, as KubeVirt's reader does.
func ifaceOf(t testing.TB, d PodIfaceCacheData) kvv1.Interface {
	t.Helper()
	var kv kvv1.Interface
	require.NoError(t, json.Unmarshal(d.Iface, &kv))
	return kv
}
