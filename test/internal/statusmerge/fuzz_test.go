package statusmerge

import (
	"slices"
	"strings"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// FuzzMergeInterfaceStatus feeds guest-controlled data (the guest agent reports whatever the guest
// says) and arbitrary cache and previous status: the merge must not panic, IP must be IPs[0], and a
// cache entry with a parseable address must fix the IP.
func FuzzMergeInterfaceStatus(f *testing.F) {
	f.Add("10.66.10.77", "fe80::1,10.66.10.77", "10.66.10.77,fd00::1", "02:00:00:00:00:01", false)
	f.Add("", "", "", "", true)
	f.Add("fd00::1,10.0.0.1", "::ffff:1.2.3.4,bogus,,fe80::1%eth0", "169.254.0.1", "02:00:00:00:00:01", true)
	f.Add("not-an-ip", "2001:db8::1", "", "02:00:00:00:00:01", false)
	f.Fuzz(func(t *testing.T, cacheIPs, agentIPs, prevIPs, agentMAC string, ipv6Primary bool) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		primary := model.IPv4
		if ipv6Primary {
			primary = model.IPv6
		}
		cached := split(cacheIPs)
		in := StatusInputs{
			Domain:     []netIface{domainIface("net1", mac1)},
			PodCache:   map[string]ifacecache.PodIfaceCacheData{"net1": {PodIPs: cached}},
			GuestAgent: []netIface{agentIface(agentMAC, "eth1", split(agentIPs)...)},
			Previous:   []netIface{{Name: "net1", MAC: mac1, IPs: split(prevIPs)}},
			Primary:    primary,
		}
		out := MergeInterfaceStatus(in)
		if len(out) == 0 || out[0].Name != "net1" {
			t.Fatalf("net1 missing from %+v", out)
		}
		// Guest-only entries are copied verbatim, as KubeVirt does; ours must be consistent.
		if got := out[0]; (len(got.IPs) == 0 && got.IP != "") || (len(got.IPs) > 0 && got.IP != got.IPs[0]) {
			t.Fatalf("IP %q is not IPs[0] of %q", got.IP, got.IPs)
		}
		if slices.Contains(out[0].IPs, "") {
			t.Fatalf("empty address in %q", out[0].IPs)
		}
		if first := parsedFirst(cached); first.IsValid() {
			v4, v6 := splitFamilies(cached)
			want := append(v4, v6...)[0]
			if first.Is6() {
				want = v6[0]
			}
			if out[0].IP != want {
				t.Fatalf("cache %q: IP %q, want %q", cached, out[0].IP, want)
			}
		}
	})
}
