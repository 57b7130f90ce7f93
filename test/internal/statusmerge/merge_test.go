package statusmerge

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

type netIface = kvv1.VirtualMachineInstanceNetworkInterface

const (
	mac1 = "02:00:00:00:00:01"
	mac2 = "02:00:00:00:00:02"
	v4   = "10.66.10.77"
	v6   = "fd00:10:66::77"
	lla  = "fe80::f4e1:74ff:fe94:b81a"
)

func domainIface(name, mac string) netIface {
	return netIface{Name: name, MAC: mac, InfoSource: "domain"}
}

func agentIface(mac, guestName string, ips ...string) netIface {
	a := netIface{MAC: mac, InterfaceName: guestName, IPs: ips}
	if len(ips) > 0 {
		a.IP = ips[0]
	}
	return a
}

func TestMergeInterfaceStatus_Rules(t *testing.T) {
	net1 := domainIface("net1", mac1)
	cacheV4 := map[string]ifacecache.PodIfaceCacheData{"net1": {PodIP: v4, PodIPs: []string{v4}}}
	cacheDual := map[string]ifacecache.PodIfaceCacheData{"net1": {PodIP: v4, PodIPs: []string{v4, v6}}}

	tests := []struct {
		name       string
		in         StatusInputs
		wantIPs    []string
		wantSource string
	}{
		{
			name:    "cache only, no agent",
			in:      StatusInputs{Domain: []netIface{net1}, PodCache: cacheDual},
			wantIPs: []string{v4, v6}, wantSource: "domain",
		},
		{
			name: "agent adds the family the cache lacks",
			in: StatusInputs{Domain: []netIface{net1}, PodCache: cacheV4,
				GuestAgent: []netIface{agentIface(mac1, "eth1", v4, "2001:db8::9", lla)}},
			wantIPs: []string{v4, "2001:db8::9", lla}, wantSource: "domain, guest-agent",
		},
		{
			name: "agent never overrides a cached family",
			in: StatusInputs{Domain: []netIface{net1}, PodCache: cacheDual,
				GuestAgent: []netIface{agentIface(mac1, "eth1", "10.0.0.99", "2001:db8::9")}},
			wantIPs: []string{v4, v6}, wantSource: "domain, guest-agent",
		},
		{
			name: "agent reporting only link-local keeps the cached IPv4 (the upstream flap)",
			in: StatusInputs{Domain: []netIface{net1}, PodCache: cacheV4,
				GuestAgent: []netIface{agentIface(mac1, "eth1", lla)}},
			wantIPs: []string{v4, lla}, wantSource: "domain, guest-agent",
		},
		{
			name: "agent reporting no address keeps the cache",
			in: StatusInputs{Domain: []netIface{net1}, PodCache: cacheDual,
				GuestAgent: []netIface{agentIface(mac1, "eth1")}},
			wantIPs: []string{v4, v6}, wantSource: "domain, guest-agent",
		},
		{
			name: "no cache: agent data, primary family first, routable before link-local",
			in: StatusInputs{Domain: []netIface{net1}, Primary: model.IPv4,
				GuestAgent: []netIface{agentIface(mac1, "eth1", lla, "2001:db8::9", v4)}},
			wantIPs: []string{v4, "2001:db8::9", lla}, wantSource: "domain, guest-agent",
		},
		{
			name: "no cache, IPv6 primary",
			in: StatusInputs{Domain: []netIface{net1}, Primary: model.IPv6,
				GuestAgent: []netIface{agentIface(mac1, "eth1", v4, "2001:db8::9")}},
			wantIPs: []string{"2001:db8::9", v4}, wantSource: "domain, guest-agent",
		},
		{
			name: "no cache: previous routable address survives a link-local-only report",
			in: StatusInputs{Domain: []netIface{net1},
				Previous:   []netIface{{Name: "net1", MAC: mac1, IP: v4, IPs: []string{v4, lla}}},
				GuestAgent: []netIface{agentIface(mac1, "eth1", lla)}},
			wantIPs: []string{v4, lla}, wantSource: "domain, guest-agent",
		},
		{
			name: "no cache: previous address of another MAC (replugged NIC) is not carried",
			in: StatusInputs{Domain: []netIface{net1},
				Previous:   []netIface{{Name: "net1", MAC: mac2, IP: v4, IPs: []string{v4}}},
				GuestAgent: []netIface{agentIface(mac1, "eth1", lla)}},
			wantIPs: []string{lla}, wantSource: "domain, guest-agent",
		},
		{
			name: "no cache: a new routable address replaces the previous one",
			in: StatusInputs{Domain: []netIface{net1},
				Previous:   []netIface{{Name: "net1", MAC: mac1, IP: v4, IPs: []string{v4}}},
				GuestAgent: []netIface{agentIface(mac1, "eth1", "10.66.10.78")}},
			wantIPs: []string{"10.66.10.78"}, wantSource: "domain, guest-agent",
		},
		{
			name: "cache with only the non-primary family leads with it",
			in: StatusInputs{Domain: []netIface{net1}, Primary: model.IPv4,
				PodCache:   map[string]ifacecache.PodIfaceCacheData{"net1": {PodIP: v6, PodIPs: []string{v6}}},
				GuestAgent: []netIface{agentIface(mac1, "eth1", v4)}},
			wantIPs: []string{v6, v4}, wantSource: "domain, guest-agent",
		},
		{
			name: "cache entry with podIP only",
			in: StatusInputs{Domain: []netIface{net1},
				PodCache: map[string]ifacecache.PodIfaceCacheData{"net1": {PodIP: v4}}},
			wantIPs: []string{v4}, wantSource: "domain",
		},
		{
			name: "masquerade drops guest link-local addresses",
			in: StatusInputs{Domain: []netIface{net1},
				Spec:       []kvv1.Interface{{Name: "net1", InterfaceBindingMethod: kvv1.InterfaceBindingMethod{Masquerade: &kvv1.InterfaceMasquerade{}}}},
				GuestAgent: []netIface{agentIface(mac1, "eth0", lla, v4)}},
			wantIPs: []string{v4}, wantSource: "domain, guest-agent",
		},
		{
			name: "MAC matched case-insensitively",
			in: StatusInputs{Domain: []netIface{domainIface("net1", "0a:bc:00:00:00:01")},
				GuestAgent: []netIface{agentIface("0A:BC:00:00:00:01", "eth1", v4)}},
			wantIPs: []string{v4}, wantSource: "domain, guest-agent",
		},
		{
			name: "old virt-launcher report (no guest interface name) keeps the info source",
			in: StatusInputs{Domain: []netIface{net1},
				GuestAgent: []netIface{agentIface(mac1, "", v4)}},
			wantIPs: []string{v4}, wantSource: "domain",
		},
		{
			name: "unparseable and duplicate addresses dropped",
			in: StatusInputs{Domain: []netIface{net1},
				GuestAgent: []netIface{agentIface(mac1, "eth1", "bogus", v4, v4, "::ffff:10.66.10.77")}},
			wantIPs: []string{v4}, wantSource: "domain, guest-agent",
		},
		{
			name:    "nothing known",
			in:      StatusInputs{Domain: []netIface{net1}},
			wantIPs: nil, wantSource: "domain",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := MergeInterfaceStatus(tt.in)
			require.Len(t, out, 1)
			assert.Equal(t, tt.wantIPs, out[0].IPs)
			want := ""
			if len(tt.wantIPs) > 0 {
				want = tt.wantIPs[0]
			}
			assert.Equal(t, want, out[0].IP)
			assert.Equal(t, tt.wantSource, out[0].InfoSource)
			assert.Equal(t, "net1", out[0].Name)
		})
	}
}

func TestMergeInterfaceStatus_GuestOnlyInterfacesAppendedAsKubeVirtDoes(t *testing.T) {
	agent := []netIface{agentIface(mac1, "eth1", v4)}
	for i := range 12 {
		agent = append(agent, agentIface(fmt.Sprintf("02:00:00:00:01:%02x", i), fmt.Sprintf("extra%d", i), lla))
	}
	out := MergeInterfaceStatus(StatusInputs{Domain: []netIface{domainIface("net1", mac1)}, GuestAgent: agent})
	require.Len(t, out, 1+10, "at most 10 guest-only interfaces")
	assert.Equal(t, "eth1", out[0].InterfaceName)
	for i, g := range out[1:] {
		assert.Empty(t, g.Name)
		assert.Equal(t, fmt.Sprintf("extra%d", i), g.InterfaceName)
		assert.Equal(t, "guest-agent", g.InfoSource)
		assert.Equal(t, lla, g.IP)
		assert.Equal(t, []string{lla}, g.IPs)
	}
}

func TestMergeInterfaceStatus_AgentEntryBelongsToFirstDomainInterfaceWithItsMAC(t *testing.T) {
	out := MergeInterfaceStatus(StatusInputs{
		Domain:     []netIface{domainIface("net1", mac1), domainIface("net2", mac1)},
		GuestAgent: []netIface{agentIface(mac1, "eth1", v4)},
	})
	require.Len(t, out, 2)
	assert.Equal(t, v4, out[0].IP)
	assert.Empty(t, out[1].IP)
}

func TestMergeInterfaceStatus_DoesNotModifyInputs(t *testing.T) {
	in := StatusInputs{
		Domain:     []netIface{{Name: "net1", MAC: mac1, IP: "1.1.1.1", IPs: []string{"1.1.1.1"}}},
		PodCache:   map[string]ifacecache.PodIfaceCacheData{"net1": {PodIP: v4, PodIPs: []string{v4}}},
		GuestAgent: []netIface{agentIface(mac1, "eth1", lla, "2001:db8::1")},
		Previous:   []netIface{{Name: "net1", MAC: mac1, IPs: []string{v4, "2001:db8::2"}}},
		Spec:       []kvv1.Interface{{Name: "net1", InterfaceBindingMethod: kvv1.InterfaceBindingMethod{Masquerade: &kvv1.InterfaceMasquerade{}}}},
	}
	agentIPs := slices.Clone(in.GuestAgent[0].IPs)
	out := MergeInterfaceStatus(in)
	require.Len(t, out, 1)
	assert.Equal(t, []string{v4, "2001:db8::1"}, out[0].IPs)
	assert.Equal(t, agentIPs, in.GuestAgent[0].IPs)
	assert.Equal(t, []string{"1.1.1.1"}, in.Domain[0].IPs)
	out[0].IPs[0] = "mutated"
	assert.Equal(t, v4, in.PodCache["net1"].PodIPs[0], "output does not alias the cache")
}

// flappingReport is the guest-agent sequence of the issue: full report, link-local only, none,
// full again.
func flappingReport() [][]netIface {
	return [][]netIface{
		{agentIface(mac1, "eth1", v4, lla)},
		{agentIface(mac1, "eth1", lla)},
		{agentIface(mac1, "eth1")},
		{agentIface(mac1, "eth1", v4, lla)},
	}
}

func TestMergeInterfaceStatus_FlappingReport_PrimaryIPNeverChanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache map[string]ifacecache.PodIfaceCacheData
	}{
		{"with pod cache entry", map[string]ifacecache.PodIfaceCacheData{"net1": {PodIP: v4, PodIPs: []string{v4}}}},
		{"guest agent only", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var previous []netIface
			for i, report := range flappingReport() {
				previous = MergeInterfaceStatus(StatusInputs{
					Domain: []netIface{domainIface("net1", mac1)}, PodCache: tc.cache,
					GuestAgent: report, Previous: previous, Primary: model.IPv4,
				})
				require.Len(t, previous, 1)
				assert.Equal(t, v4, previous[0].IP, "report %d", i)
			}
		})
	}
}

// randomAddresses draws addresses from a small pool (so repeats and overlaps happen) that mixes
// routable and link-local addresses of both families, an IPv4-mapped form and garbage.
func randomAddresses(r *rand.Rand) []string {
	pool := []string{
		"10.66.10.77", "10.66.10.78", "192.168.1.5", "169.254.3.4",
		"fd00:10:66::77", "2001:db8::5", "fe80::1", "fe80::f4e1:74ff:fe94:b81a",
		"::ffff:10.66.10.79", "not-an-ip", "",
	}
	n := r.IntN(5)
	out := make([]string, 0, n)
	for range n {
		out = append(out, pool[r.IntN(len(pool))])
	}
	return out
}

func routableFamily(ips []string, is4 bool) bool {
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap().IsGlobalUnicast() && a.Unmap().Is4() == is4 {
			return true
		}
	}
	return false
}

// TestMergeInterfaceStatus_PropertyRandomAgentReports checks, over many random sequences of
// guest-agent reports (deterministic seed), that:
//   - an interface with a pod cache entry always reports the cache's first address as its IP and
//     always carries every cached address;
//   - for any interface, once a routable address of a family was reported, every later status
//     still has a routable address of that family (link-local never displaces it, a missing
//     report never clears it);
//   - IP is always IPs[0].
func TestMergeInterfaceStatus_PropertyRandomAgentReports(t *testing.T) {
	const seed, sequences, steps = 20261129, 2000, 12
	r := rand.New(rand.NewPCG(seed, seed))
	caches := []ifacecache.PodIfaceCacheData{
		{PodIP: v4, PodIPs: []string{v4}},
		{PodIP: v6, PodIPs: []string{v6}},
		{PodIP: v4, PodIPs: []string{v4, v6}},
		{PodIP: v6, PodIPs: []string{v6, v4}},
	}
	for seq := range sequences {
		primary := []model.Family{model.IPv4, model.IPv6}[r.IntN(2)]
		cache := map[string]ifacecache.PodIfaceCacheData{"net1": caches[r.IntN(len(caches))]}
		domain := []netIface{domainIface("net1", mac1), domainIface("net2", mac2)}
		var previous []netIface
		seen4, seen6 := map[string]bool{}, map[string]bool{}
		for step := range steps {
			var agent []netIface
			for _, mac := range []string{mac1, mac2, "02:00:00:00:00:09"} {
				if r.IntN(4) > 0 { // sometimes the agent does not report an interface at all
					agent = append(agent, agentIface(mac, "eth", randomAddresses(r)...))
				}
			}
			out := MergeInterfaceStatus(StatusInputs{Domain: domain, PodCache: cache, GuestAgent: agent, Previous: previous, Primary: primary})
			fail := func(format string, args ...any) {
				t.Fatalf("seed %d sequence %d step %d (primary %d, cache %v, agent %+v): %s\nstatus %+v",
					seed, seq, step, primary, cache["net1"], agent, fmt.Sprintf(format, args...), out)
			}
			if len(out) < 2 || out[0].Name != "net1" || out[1].Name != "net2" {
				fail("domain interfaces not first and in order")
			}
			for _, s := range out {
				if (len(s.IPs) == 0 && s.IP != "") || (len(s.IPs) > 0 && s.IP != s.IPs[0]) {
					fail("IP %q is not IPs[0] of %v", s.IP, s.IPs)
				}
			}
			if out[0].IP != cache["net1"].PodIP {
				fail("net1 IP %q, cache says %q", out[0].IP, cache["net1"].PodIP)
			}
			for _, c := range cache["net1"].PodIPs {
				if !slices.Contains(out[0].IPs, c) {
					fail("net1 lost cached address %q", c)
				}
			}
			for _, s := range out[:2] {
				if seen4[s.Name] && !routableFamily(s.IPs, true) {
					fail("%s lost its routable IPv4", s.Name)
				}
				if seen6[s.Name] && !routableFamily(s.IPs, false) {
					fail("%s lost its routable IPv6", s.Name)
				}
				seen4[s.Name] = seen4[s.Name] || routableFamily(s.IPs, true)
				seen6[s.Name] = seen6[s.Name] || routableFamily(s.IPs, false)
			}
			previous = out
		}
	}
}

func BenchmarkMergeInterfaceStatus_64Interfaces(b *testing.B) {
	in := StatusInputs{PodCache: map[string]ifacecache.PodIfaceCacheData{}, Primary: model.IPv4}
	for i := range 64 {
		name, mac := fmt.Sprintf("net%d", i), fmt.Sprintf("02:00:00:00:01:%02x", i)
		in.Domain = append(in.Domain, domainIface(name, mac))
		in.PodCache[name] = ifacecache.PodIfaceCacheData{PodIP: v4, PodIPs: []string{v4, v6}}
		in.GuestAgent = append(in.GuestAgent, agentIface(mac, "eth", v4, lla))
	}
	b.ReportAllocs()
	for b.Loop() {
		in.Previous = MergeInterfaceStatus(in)
	}
}
