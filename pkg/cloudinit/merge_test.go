package cloudinit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// mergeIfaces are the two NICs of ours every merge case adds: net1 dual-stack with default routes, an
// IPv4 route, DNS and MTU; net2 plain IPv4.
func mergeIfaces() []model.BoundInterface {
	return []model.BoundInterface{
		nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Role = "primary"
			b.Addresses = pfx("10.128.0.5/16", "fd10:128::5/64")
			b.Gateways = addrs("10.128.0.1", "fd10:128::1")
			b.Routes = []model.Route{route("100.65.0.0/16", "10.128.0.1")}
			b.DNS = model.DNS{Nameservers: addrs("172.30.0.10"), Search: []string{"svc.cluster.local"}}
			b.MTU = 1400
		}),
		nic("net2", "02:00:00:aa:bb:02", func(b *model.BoundInterface) { b.Addresses = pfx("10.30.0.5/24") }),
	}
}

type mergeCase struct {
	file string // under testdata/merge
	// theirs is what the renderers must configure for the user's own NICs.
	theirs map[string]*facts
	// dropped lists our interfaces the user configures (theirs wins).
	dropped []string
	// macNames names network_data.json links that have no "name" (net-convert -m).
	macNames map[string]string
	// quirk adjusts what a renderer shows for every interface (e.g. global DNS); since25 says the
	// cloud-init under test is 25 or newer.
	quirk func(renderer string, since25 bool, f facts) facts
}

// globalDNS: a user's global nameserver entry (v1 "nameserver", network_data.json "services") is written
// by networkd into every .network file. cloud-init 25.1.4's network-manager renderer writes it into every
// connection that has no DNS of its own, per family where the connection has that family's section
// (network_manager.py "add the global DNS to the connection"); 22.4.2 kept it out. Accepted: the user
// asked for that resolver, and our NICs carry their own DNS when the pod has any.
func globalDNS(nameservers, search []string) func(string, bool, facts) facts {
	return func(renderer string, since25 bool, f facts) facts {
		switch {
		case renderer == "networkd":
			f.Nameservers = append(slices.Clone(f.Nameservers), nameservers...)
			f.Search = append(slices.Clone(f.Search), search...)
		case renderer == "network-manager" && since25:
			has4, has6 := f.DHCP4, f.DHCP6
			for _, a := range f.Addresses {
				has4, has6 = has4 || !strings.Contains(a, ":"), has6 || strings.Contains(a, ":")
			}
			if len(f.Nameservers) == 0 {
				for _, ns := range nameservers {
					if strings.Contains(ns, ":") && has6 || !strings.Contains(ns, ":") && has4 {
						f.Nameservers = append(f.Nameservers, ns)
					}
				}
			}
			if len(f.Search) == 0 && (has4 || has6) {
				f.Search = append(slices.Clone(f.Search), search...)
			}
		}
		f.normalise()
		return f
	}
}

func dhcp4NIC(mac string) *facts { return &facts{Up: true, MAC: mac, DHCP4: true} }

func staticNIC(mac, cidr string, routes ...string) *facts {
	return &facts{Up: true, MAC: mac, Addresses: []string{cidr}, Routes: routes}
}

func mergeCases() []mergeCase {
	return []mergeCase{
		{file: "user-v1.in.yaml", theirs: map[string]*facts{"eth0": dhcp4NIC("02:00:00:00:00:10")}, quirk: globalDNS([]string{"10.0.0.53"}, []string{"corp.example"})},
		{file: "user-v1-json.in.yaml", theirs: map[string]*facts{"eth0": dhcp4NIC("02:00:00:00:00:10")}},
		{file: "user-v1-same-nic.in.yaml", dropped: []string{"net1"}, theirs: map[string]*facts{
			"mynic": staticNIC("02:00:00:aa:bb:01", "192.168.50.5/24", "0.0.0.0/0 via 192.168.50.1"),
		}},
		{file: "user-v2.in.yaml", theirs: map[string]*facts{"eth0": dhcp4NIC("02:00:00:00:00:10")}},
		{file: "user-v2-wrapped.in.yaml", theirs: map[string]*facts{"eth0": staticNIC("02:00:00:00:00:10", "192.168.60.5/24")}},
		{file: "user-v2-same-nic.in.yaml", dropped: []string{"net1", "net2"}, theirs: map[string]*facts{
			"net1":   staticNIC("02:00:00:00:00:11", "192.168.70.5/24"),
			"theirs": staticNIC("02:00:00:aa:bb:02", "192.168.80.5/24"),
		}},
		{file: "user-json.in.json", macNames: map[string]string{"02:00:00:00:00:10": "eth0"}, theirs: map[string]*facts{
			"eth0": {Up: true, MAC: "02:00:00:00:00:10", MTU: 1500, DHCP4: true},
		}, quirk: globalDNS([]string{"10.0.0.53"}, nil)},
		{file: "user-json-same-nic.in.json", dropped: []string{"net1"}, macNames: map[string]string{"02:00:00:aa:bb:01": "mynic"},
			theirs: map[string]*facts{"mynic": staticNIC("02:00:00:aa:bb:01", "192.168.90.5/24")}},
		{file: "user-json-id-clash.in.json", macNames: map[string]string{"02:00:00:00:00:10": "eth0"},
			theirs: map[string]*facts{"eth0": dhcp4NIC("02:00:00:00:00:10")}},
		// Ids that differ from ours only in case (Windows adapter names are case-insensitive), and a
		// top-level IPv6 DNS service: our networks repeat the NIC's services (spreadDNSServices).
		{file: "user-json-case-clash.in.json", macNames: map[string]string{"02:00:00:00:00:10": "eth0"},
			theirs: map[string]*facts{"eth0": dhcp4NIC("02:00:00:00:00:10")}, quirk: globalDNS([]string{"fd00::53"}, nil)},
	}
}

func merge(t *testing.T, file string, ifaces []model.BoundInterface) (user, out []byte, err error) {
	t.Helper()
	user, rerr := os.ReadFile(filepath.Join("testdata", "merge", file))
	require.NoError(t, rerr)
	if strings.HasSuffix(file, ".json") {
		out, err = MergeNetworkDataJSON(user, ifaces)
	} else {
		out, err = MergeNoCloud(user, ifaces)
	}
	return user, out, err
}

func TestMerge_MatchesGoldenFilesAndKeepsEveryUserEntry(t *testing.T) {
	for _, tc := range mergeCases() {
		t.Run(tc.file, func(t *testing.T) {
			user, out, err := merge(t, tc.file, mergeIfaces())
			require.NoError(t, err)
			assertGolden(t, goldenPath("merge", strings.Replace(tc.file, ".in.", ".out.", 1)), out)
			if strings.HasSuffix(tc.file, ".json") {
				assert.NoError(t, userJSONPreserved(user, out))
			} else {
				assert.NoError(t, userYAMLPreserved(user, out))
			}
			// A NIC the user configures keeps only their entry: its MAC appears as often as in their data.
			for _, b := range mergeIfaces() {
				ours := b.MAC.String()
				want := strings.Count(strings.ToLower(string(user)), ours)
				if !slices.Contains(tc.dropped, b.Name) {
					want++
				}
				assert.Equal(t, want, strings.Count(strings.ToLower(string(out)), ours), "entries with the MAC of %s", b.Name)
			}
		})
	}
}

func TestNetConvert_MergedConfigKeepsUserEntriesAndAddsOurs(t *testing.T) {
	requireNetConvert(t)
	for _, tc := range mergeCases() {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			_, out, err := merge(t, tc.file, mergeIfaces())
			require.NoError(t, err)
			want := map[string]*facts{}
			for _, b := range mergeIfaces() {
				name, f := expectFacts(b)
				want[name] = f
			}
			for _, name := range tc.dropped {
				delete(want, name)
			}
			for name, f := range tc.theirs {
				f.normalise()
				want[name] = f
			}
			v25 := since25(t)
			kind, quirk := "yaml", func(_ string, f facts) facts { return f }
			if strings.HasSuffix(tc.file, ".json") {
				kind, quirk = "network_data.json", networkDataQuirk(t)
			}
			checkRendered(t, out, kind, tc.macNames, want, func(renderer string, f facts) facts {
				f = quirk(renderer, f)
				if tc.quirk != nil {
					f = tc.quirk(renderer, v25, f)
				}
				return f
			})
		})
	}
}

func TestMergeNoCloud_RejectsWhatItCannotParse_NamingNetworkData(t *testing.T) {
	for _, tc := range []struct{ name, user, want string }{
		{"not YAML", "version: [1\n", "noCloud networkData: parsing YAML"},
		{"two documents", "version: 1\n---\nversion: 2\n", "more than one document"},
		{"a list", "- 1\n", "top level is not a mapping"},
		{"no version", "config: []\n", "version must be 1 or 2, got none"},
		{"version 3", "version: 3\n", `got "3"`},
		{"quoted version", "version: \"2\"\n", `got "2"`},
		{"v1 config not a list", "version: 1\nconfig: {a: b}\n", `"config" is not a list`},
		{"v2 ethernets not a mapping", "version: 2\nethernets: [a]\n", `"ethernets" is not a mapping`},
		{"network not a mapping", "network: 5\n", `"network" is not a mapping`},
		{"networking disabled", "network: {config: disabled}\n", "disables networking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MergeNoCloud([]byte(tc.user), mergeIfaces())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "networkData")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMergeNetworkDataJSON_RejectsWhatItCannotParse_NamingNetworkData(t *testing.T) {
	for _, tc := range []struct{ name, user, want string }{
		{"YAML", "version: 2\n", "not a JSON object"},
		{"a list", "[]", "not a JSON object"},
		{"links not a list", `{"links": {}}`, `"links" is not a list`},
		{"services not a list", `{"services": "dns"}`, `"services" is not a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MergeNetworkDataJSON([]byte(tc.user), mergeIfaces())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "configDrive networkData")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMerge_EmptyUserDataGivesOursAlone(t *testing.T) {
	v1, err := RenderNetworkConfigV1(mergeIfaces())
	require.NoError(t, err)
	nd, err := renderNetworkDataJSON(mergeIfaces())
	require.NoError(t, err)
	for _, user := range []string{"", "  \n", "# only a comment\n", "null\n", "~"} {
		got, err := MergeNoCloud([]byte(user), mergeIfaces())
		require.NoError(t, err)
		assert.Equal(t, string(v1), string(got), "user data %q", user)
	}
	for _, user := range []string{"", " \n", "null"} {
		got, err := MergeNetworkDataJSON([]byte(user), mergeIfaces())
		require.NoError(t, err)
		assert.Equal(t, string(nd), string(got), "user data %q", user)
	}
}

// canonicalYAML decodes a YAML value and re-encodes it with sorted keys, for comparing meaning.
func canonicalYAML(n *yaml.Node) (string, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return "", err
	}
	b, err := yaml.Marshal(v)
	return string(b), err
}

// userYAMLPreserved checks that every entry of the user's network-config is in the merged output with the
// same meaning: v1 config items, v2 interface IDs with their settings, and every other top-level key.
// It returns nil when the user document cannot be decoded generically (nothing to compare).
func userYAMLPreserved(user, out []byte) error {
	uDoc, err := decodeYAML(user)
	if err != nil || uDoc == nil {
		return nil
	}
	oDoc, err := decodeYAML(out)
	if err != nil {
		return err
	}
	if oDoc == nil {
		return errorf("merged output is empty")
	}
	uBody, oBody := body(uDoc), body(oDoc)
	if uBody == nil || uBody.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(uBody.Content); i += 2 {
		key, ok := scalar(uBody.Content[i])
		if !ok {
			continue
		}
		uVal, oVal := resolve(uBody.Content[i+1]), resolve(lookup(oBody, key))
		if oVal == nil {
			return errorf("top-level key %q lost", key)
		}
		switch {
		case uVal.Kind == yaml.ScalarNode && uVal.ShortTag() == "!!null" && (key == "config" || key == "ethernets"):
			// an empty list or mapping written as null: we fill it
		case uVal.Kind == yaml.SequenceNode && oVal.Kind == yaml.SequenceNode:
			// v1 "config": each user item must still be there, in order, with our items after them.
			if len(oVal.Content) < len(uVal.Content) {
				return errorf("%q lost items", key)
			}
			for j := range uVal.Content {
				if err := sameYAML(uVal.Content[j], oVal.Content[j]); err != nil {
					return errorf("%q item %d: %v", key, j, err)
				}
			}
		case uVal.Kind == yaml.MappingNode && oVal.Kind == yaml.MappingNode:
			// v2 sections: every user ID must still map to the same settings.
			for j := 0; j+1 < len(uVal.Content); j += 2 {
				id, ok := scalar(uVal.Content[j])
				if !ok {
					continue
				}
				if err := sameYAML(lookup(uVal, id), lookup(oVal, id)); err != nil {
					return errorf("%q entry %q: %v", key, id, err)
				}
			}
		default:
			if err := sameYAML(uVal, oVal); err != nil {
				return errorf("key %q: %v", key, err)
			}
		}
	}
	return nil
}

func body(doc *yaml.Node) *yaml.Node {
	b := resolve(doc.Content[0])
	if w := lookup(b, "network"); w != nil {
		return resolve(w)
	}
	return b
}

func sameYAML(a, b *yaml.Node) error {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return errorf("missing")
	}
	ca, errA := canonicalYAML(a)
	cb, errB := canonicalYAML(b)
	if errA != nil {
		return nil // not decodable generically (e.g. a list as a mapping key): nothing to compare
	}
	if errB != nil || ca != cb {
		return errorf("changed:\n%s\nbecame:\n%s", ca, cb)
	}
	return nil
}

// userJSONPreserved checks that the user's links, networks and services are all in the output unchanged
// and in order, after ours (oursFirst: they are the tail of each list), and that every other top-level
// key is unchanged.
func userJSONPreserved(user, out []byte) error {
	var u, o map[string]json.RawMessage
	if json.Unmarshal(user, &u) != nil || u == nil {
		return nil
	}
	if err := json.Unmarshal(out, &o); err != nil {
		return errorf("output is not a JSON object: %v", err)
	}
	for key, uv := range u {
		ov, ok := o[key]
		if !ok {
			return errorf("key %q lost", key)
		}
		var ul, ol []json.RawMessage
		if key == "links" || key == "networks" || key == "services" {
			if json.Unmarshal(uv, &ul) != nil {
				return nil
			}
			if err := json.Unmarshal(ov, &ol); err != nil || len(ol) < len(ul) {
				return errorf("%q lost items", key)
			}
			tail := ol[len(ol)-len(ul):]
			for i := range ul {
				if !jsonEqual(ul[i], tail[i]) {
					return errorf("%q item %d changed or not after ours: %s became %s", key, i, ul[i], tail[i])
				}
			}
			continue
		}
		if !jsonEqual(uv, ov) {
			return errorf("key %q changed: %s became %s", key, uv, ov)
		}
	}
	return nil
}

// jsonEqual compares two JSON values by meaning, numbers by their literal text.
func jsonEqual(a, b json.RawMessage) bool {
	canon := func(r json.RawMessage) string {
		var v any
		d := json.NewDecoder(strings.NewReader(string(r)))
		d.UseNumber()
		if d.Decode(&v) != nil {
			return "invalid:" + string(r)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return canon(a) == canon(b)
}

func TestMergeNoCloud_NestedMergeKeys_StayLinear(t *testing.T) {
	// Twenty levels of "<<" to ten copies of the level below: 10^20 paths if merges were expanded naively.
	var b strings.Builder
	b.WriteString("version: 2\nanchors:\n  l0: &l0 {match: {macaddress: \"02:00:00:00:00:99\"}}\n")
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	b.WriteString("ethernets:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "  e%d: {<<: *l20}\n", i)
	}
	out, err := MergeNoCloud([]byte(b.String()), mergeIfaces())
	require.NoError(t, err)
	assert.Contains(t, string(out), `"net1":`)
}

func TestMergeNoCloud_BlankUserDataIsNone_RendersOurV1(t *testing.T) {
	want, err := RenderNetworkConfigV1(mergeIfaces())
	require.NoError(t, err)
	for _, user := range []string{"", "\n", " \t\n", "\v\f", "\u00a0"} {
		got, err := MergeNoCloud([]byte(user), mergeIfaces())
		require.NoError(t, err, "%q", user)
		assert.Equal(t, string(want), string(got), "%q", user)
	}
	// Anything else is parsed: a comment-only document is YAML null, also none.
	got, err := MergeNoCloud([]byte("# nothing here\n"), mergeIfaces())
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// Our strings merged into the user's YAML stay double-quoted, including those PyYAML (YAML 1.1) would
// read as another type if plain: an all-digit MAC is a base-60 integer to it, "yes" a bool.
func TestMergeNoCloud_OurStringsStayQuotedForPyYAML(t *testing.T) {
	ifaces := []model.BoundInterface{nic("yes", "52:54:00:12:34:56", func(b *model.BoundInterface) { b.Addresses = pfx("10.30.0.5/24") })}
	for user, want := range map[string][]string{
		"version: 1\n": {`mac_address: "52:54:00:12:34:56"`, `name: "yes"`, `address: "10.30.0.5/24"`, `type: "physical"`},
		"version: 2\n": {`macaddress: "52:54:00:12:34:56"`, `"yes":`, `set-name: "yes"`, `- "10.30.0.5/24"`},
	} {
		out, err := MergeNoCloud([]byte(user), ifaces)
		require.NoError(t, err)
		for _, w := range want {
			assert.Contains(t, string(out), w, "user %q", user)
		}
	}
}

// lookup looks key up in m with a budget of its own.
func lookup(m *yaml.Node, key string) *yaml.Node { return newMergeBudget().lookup(m, key) }
