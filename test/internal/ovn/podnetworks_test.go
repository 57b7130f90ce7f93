package ovn

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JSON has OVN-K's shape: ip_addresses and mac_address always present, the rest only when set.
func TestPodNetwork_MarshalsAsOVNKWritesIt(t *testing.T) {
	for name, tc := range map[string]struct {
		in   PodNetwork
		want string
	}{
		"IPAM-less": {PodNetwork{MACAddress: "02:00:00:00:00:01", Role: "secondary"},
			`{"ip_addresses":null,"mac_address":"02:00:00:00:00:01","role":"secondary"}`},
		"routed": {PodNetwork{IPAddresses: []string{"10.244.0.5/24"}, MACAddress: "0a:58:0a:f4:00:05", GatewayIPs: []string{"10.244.0.1"},
			Routes: []PodRoute{{Dest: "10.96.0.0/16", NextHop: "10.244.0.1"}}, IPAddress: "10.244.0.5/24", GatewayIP: "10.244.0.1", Role: "primary"},
			`{"ip_addresses":["10.244.0.5/24"],"mac_address":"0a:58:0a:f4:00:05","gateway_ips":["10.244.0.1"],"routes":[{"dest":"10.96.0.0/16","nextHop":"10.244.0.1"}],"ip_address":"10.244.0.5/24","gateway_ip":"10.244.0.1","role":"primary"}`},
		"dhcp": {PodNetwork{MACAddress: "02:00:00:00:00:02", Role: "secondary", IPAMMode: "dhcp"},
			`{"ip_addresses":null,"mac_address":"02:00:00:00:00:02","role":"secondary","ipam_mode":"dhcp"}`},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(b), "OVN-K's fields, in its order")
		})
	}
}

func TestDecode_Prefixes(t *testing.T) {
	pns, err := Decode(`{"ns/blue":{"ip_addresses":["10.200.0.10/24","fd70::0a/64"]}}`)
	require.NoError(t, err)
	got, err := pns["ns/blue"].Prefixes()
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.200.0.10/24"), netip.MustParsePrefix("fd70::a/64")}, got)

	_, err = PodNetwork{IPAddresses: []string{"10.200.0.10"}}.Prefixes()
	assert.ErrorContains(t, err, "ip_addresses")
	_, err = Decode(`{`)
	assert.ErrorContains(t, err, "decode k8s.ovn.org/pod-networks")
}
