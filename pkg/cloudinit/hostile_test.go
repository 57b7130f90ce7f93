package cloudinit

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// ourKeys are the only mapping keys our renderers write (v1, v2, network_data.json).
var ourKeys = map[string]bool{
	"version": true, "config": true, "type": true, "name": true, "mac_address": true, "mtu": true, "subnets": true,
	"address": true, "gateway": true, "dns_nameservers": true, "dns_search": true, "routes": true, "network": true,
	"prefix": true, "ethernets": true, "match": true, "macaddress": true, "set-name": true, "dhcp4": true,
	"dhcp6": true, "addresses": true, "gateway4": true, "gateway6": true, "nameservers": true, "search": true,
	"to": true, "via": true, "links": true, "networks": true, "services": true, "id": true,
	"ethernet_mac_address": true, "link": true, "ip_address": true, "netmask": true,
}

// hostileStrings carry YAML/JSON metacharacters, newlines, document markers and look-alikes.
var hostileStrings = []string{
	"evil\nversion: 3", "a: b", "- x", `"quoted"`, "'single'", `{"links":[]}`, "*alias", "&anchor x",
	"!!python/object/apply:os.system ['id']", "# comment", "x\x00y", "line\u2028sep", "---\nversion: 2",
	"...", "yes", "52:54:00:12:34:56", "1e3", "~", "null", "", "eth0", "net1", "\t", "ünïcødé",
	strings.Repeat("A", 4096), `\u0000`, "}", "]", "<script>", "a\r\nb: c",
}

// yamlKeys collects every scalar mapping key in a YAML document, visiting each node once (aliases can
// make a document exponentially large when expanded).
func yamlKeys(n *yaml.Node, into map[string]bool, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	if n.Kind == yaml.AliasNode {
		yamlKeys(n.Alias, into, seen)
		return
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			if v, ok := scalar(c); ok {
				into[v] = true
			}
		}
		yamlKeys(c, into, seen)
	}
}

func jsonKeys(v any, into map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			into[k] = true
			jsonKeys(c, into)
		}
	case []any:
		for _, c := range t {
			jsonKeys(c, into)
		}
	}
}

// injectedKeys returns the keys of out that are neither the user's, nor ours, nor one of our guest names.
func injectedKeys(user, out []byte, isJSON bool, ifaces []model.BoundInterface) ([]string, error) {
	have, allowed := map[string]bool{}, map[string]bool{}
	for k := range ourKeys {
		allowed[k] = true
	}
	for _, b := range ifaces {
		allowed[guestName(b.Name)] = true
	}
	if isJSON {
		var u, o any
		_ = json.Unmarshal(user, &u)
		jsonKeys(u, allowed)
		if err := json.Unmarshal(out, &o); err != nil {
			return nil, err
		}
		jsonKeys(o, have)
	} else {
		if u, err := decodeYAML(user); err == nil {
			yamlKeys(u, allowed, map[*yaml.Node]bool{})
		}
		o, err := decodeYAML(out)
		if err != nil {
			return nil, err
		}
		yamlKeys(o, have, map[*yaml.Node]bool{})
	}
	var extra []string
	for k := range have {
		if !allowed[k] {
			extra = append(extra, k)
		}
	}
	return extra, nil
}

func TestRender_HostileStringsInNonDNSFields_GiveSafeOutputWithOnlyOurKeys(t *testing.T) {
	fields := map[string]func(*model.BoundInterface, string){
		"Name":             func(b *model.BoundInterface, s string) { b.Name = s },
		"Network":          func(b *model.BoundInterface, s string) { b.Network = s },
		"NetworkName":      func(b *model.BoundInterface, s string) { b.NetworkName = s },
		"PodInterfaceName": func(b *model.BoundInterface, s string) { b.PodInterfaceName = s },
		"Role":             func(b *model.BoundInterface, s string) { b.Role = s },
		"MACSource":        func(b *model.BoundInterface, s string) { b.MACSource = model.MACSource(s) },
		"HostPCIAddress":   func(b *model.BoundInterface, s string) { b.HostPCIAddress = s },
		"DeviceType":       func(b *model.BoundInterface, s string) { b.DeviceType = s },
		"GuestPCIAddress":  func(b *model.BoundInterface, s string) { b.GuestPCIAddress = s },
	}
	users := map[string][]byte{
		"v1":   []byte("version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: '02:00:00:00:00:10'\n"),
		"v2":   []byte("version: 2\nethernets:\n  eth0: {dhcp4: true}\n"),
		"json": []byte(`{"links":[{"id":"x","type":"phy","ethernet_mac_address":"02:00:00:00:00:10"}]}`),
	}
	for field, setField := range fields {
		for _, s := range hostileStrings {
			ifaces := mergeIfaces()
			setField(&ifaces[0], s)
			t.Logf("field %s = %q", field, s)
			outputs := renderAllForms(t, ifaces, users)
			baseline := renderAllForms(t, mergeIfaces(), users)
			for kind, out := range outputs {
				user := users[strings.TrimPrefix(kind, "merge-")]
				if !strings.HasPrefix(kind, "merge-") {
					user = nil
				}
				extra, err := injectedKeys(user, out, strings.HasSuffix(kind, "json"), ifaces)
				require.NoError(t, err, "%s output does not parse for field %s = %q:\n%s", kind, field, s, out)
				assert.Empty(t, extra, "%s: keys injected via field %s = %q", kind, field, s)
				kept := field == "Name" && guestName(s) == s // a safe interface name is used, quoted
				if len(s) > 2 && !kept && !strings.Contains(string(baseline[kind]), s) {
					assert.NotContains(t, string(out), s, "%s: field %s is never copied raw", kind, field)
				}
			}
		}
	}
}

func TestRender_HostileDNSSearchDomain_IsAnErrorNamingTheInterface(t *testing.T) {
	for _, s := range hostileStrings {
		if netval.ValidDNSName(s) {
			continue // a valid domain name, e.g. "eth0"
		}
		for _, field := range []string{"Search", "Domain"} {
			if field == "Domain" && s == "" {
				continue // an empty Domain means none
			}
			ifaces := mergeIfaces()
			if field == "Search" {
				ifaces[0].DNS.Search = []string{"ok.example", s}
			} else {
				ifaces[0].DNS.Domain = s
			}
			for format, render := range map[string]func([]model.BoundInterface) ([]byte, error){
				"v1": RenderNetworkConfigV1, "v2": renderNetworkConfigV2, "json": renderNetworkDataJSON,
			} {
				_, err := render(ifaces)
				require.Error(t, err, "%s: DNS %s %q", format, field, s)
				assert.Contains(t, err.Error(), `interface "net1"`)
				assert.Contains(t, err.Error(), "DNS search domain")
			}
		}
	}
}

func TestRender_GuestName_KeepsSafeVMINamesAndHashesTheRest(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keep bool
	}{
		{"net1", true}, {"sriov-a_1", true}, {"abcdefghijklmno", true}, {"Net1", true},
		{"abcdefghijklmnop", false}, // 16 bytes > IFNAMSIZ-1
		{"eth1", false}, {"ens3", false}, {"enp1s0", false}, {"lo", false}, {"vf0", false}, {"1net", false},
		{"a.b", false}, {"a b", false}, {"a/b", false}, {"", false},
	} {
		got := guestName(tc.in)
		assert.LessOrEqual(t, len(got), 15, "IFNAMSIZ")
		if tc.keep {
			assert.Equal(t, tc.in, got)
		} else {
			assert.Regexp(t, `^vf[0-9a-f]{11}$`, got, "hashed name for %q", tc.in)
			assert.Equal(t, got, guestName(tc.in), "stable")
		}
	}
	assert.NotEqual(t, guestName("eth1"), guestName("eth2"))
}

func TestRender_RejectsInterfacesItCannotConfigure_NamingThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*model.BoundInterface)
		want string
	}{
		{"no MAC", func(b *model.BoundInterface) { b.MAC = netval.MAC{} }, "no MAC address from any source"},
		{"MTU", func(b *model.BoundInterface) { b.MTU = 70000 }, "MTU 70000 out of range"},
		{"default route as route", func(b *model.BoundInterface) { b.Routes = []model.Route{route("::/0", "fd10:128::1")} }, "default routes must come as gateways"},
		{"route mixes families", func(b *model.BoundInterface) { b.Routes = []model.Route{route("10.9.0.0/16", "fd10:128::1")} }, "mixes address families"},
		{"route without address of its family", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.128.0.5/16")
			b.Gateways = addrs("10.128.0.1")
			b.Routes = []model.Route{route("fd99::/64", "fd10:128::1")}
		}, "no IPv6 address"},
		{"gateway without address of its family", func(b *model.BoundInterface) { b.Addresses = pfx("10.128.0.5/16") }, "IPv6 gateway fd10:128::1 but no IPv6 address"},
		{"two gateways of one family", func(b *model.BoundInterface) { b.Gateways = addrs("10.128.0.1", "10.128.0.2") }, "two IPv4 gateways"},
		{"zoned gateway", func(b *model.BoundInterface) { b.Gateways = addrs("fe80::1%evil\nkey") }, "has a zone"},
		{"IPv4-mapped address", func(b *model.BoundInterface) { b.Addresses = pfx("::ffff:10.0.0.1/120") }, "IPv4-mapped"},
		{"zero prefix address", func(b *model.BoundInterface) { b.Addresses = pfx("10.0.0.1/0") }, "prefix length 0"},
		{"invalid nameserver", func(b *model.BoundInterface) { b.DNS.Nameservers = addrs("0.0.0.0") }, "unspecified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ifaces := mergeIfaces()
			tc.mod(&ifaces[0])
			for _, render := range []func([]model.BoundInterface) ([]byte, error){RenderNetworkConfigV1, renderNetworkConfigV2, renderNetworkDataJSON} {
				_, err := render(ifaces)
				require.Error(t, err)
				assert.Contains(t, err.Error(), `interface "net1"`)
				assert.Contains(t, err.Error(), tc.want)
			}
		})
	}
	dup := mergeIfaces()
	dup[1].MAC = dup[0].MAC
	_, err := RenderNetworkConfigV1(dup)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `interfaces "net1" and "net2" have the same MAC`)
}

// renderAllForms renders ifaces in every form and merged into each user document.
func renderAllForms(t *testing.T, ifaces []model.BoundInterface, users map[string][]byte) map[string][]byte {
	t.Helper()
	outputs := map[string][]byte{}
	var err error
	outputs["v1"], err = RenderNetworkConfigV1(ifaces)
	require.NoError(t, err)
	outputs["v2"], err = renderNetworkConfigV2(ifaces)
	require.NoError(t, err)
	outputs["json"], err = renderNetworkDataJSON(ifaces)
	require.NoError(t, err)
	outputs["merge-v1"], err = MergeNoCloud(users["v1"], ifaces)
	require.NoError(t, err)
	outputs["merge-v2"], err = MergeNoCloud(users["v2"], ifaces)
	require.NoError(t, err)
	outputs["merge-json"], err = MergeNetworkDataJSON(users["json"], ifaces)
	require.NoError(t, err)
	return outputs
}

// The patterns guestName's hand-written checks replace; kept here as their oracle.
var (
	safeIfnamePattern   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,14}$`)
	kernelIfnamePattern = regexp.MustCompile(`^(eth|en|wl|ww|ib|sl|lo$|bond|veth|tap|tun|br|all$|default$)`)
)

func FuzzGuestName_AgreesWithTheIfnamePatterns(f *testing.F) {
	for _, s := range []string{"", "a", "net1", "eth0", "en", "lo", "lo0", "all", "allx", "default", "defaults", "vfabc",
		"sriov-l2", "_x", "1abc", "abcdefghijklmno", "abcdefghijklmnop", "a b", "ä", "bridge", "tap0", "wlan"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isSafeIfname(s), safeIfnamePattern.MatchString(s); got != want {
			t.Fatalf("isSafeIfname(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := looksKernelAssigned(s), kernelIfnamePattern.MatchString(s); got != want {
			t.Fatalf("looksKernelAssigned(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
