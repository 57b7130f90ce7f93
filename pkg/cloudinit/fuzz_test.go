package cloudinit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// fuzzIfaces builds our two NICs with fuzzed strings in the fields that reach the output.
func fuzzIfaces(name, search string) []model.BoundInterface {
	ifaces := mergeIfaces()
	ifaces[0].Name = name
	ifaces[0].DNS.Search = []string{search}
	if guestName(name) == "net2" {
		ifaces[1].Name = "net3"
	}
	return ifaces
}

// maxAllocated is what one merge of user may allocate: the limits (limits.go) make the work linear in
// the input, so a constant plus a per-byte allowance. perByte covers YAML's worst case, a node every
// two bytes at ~2 KiB of parser and emitter memory per node; JSON needs far less. Before the limits, 2 KB
// of JSON nested 1,000 deep allocated over 4 MB.
func maxAllocated(user []byte, perByte uint64) uint64 {
	return 1<<20 + perByte*uint64(len(user))
}

// errorNamesItsSource: every error says which input it is about.
func errorNamesItsSource(t *testing.T, err error, sources ...string) {
	t.Helper()
	for _, s := range sources {
		if strings.Contains(err.Error(), s) {
			return
		}
	}
	t.Fatalf("error names none of %q: %v", sources, err)
}

func FuzzMergeNoCloud(f *testing.F) {
	for _, seed := range []string{
		"", "version: 1\nconfig: []\n", "version: 2\nethernets: {}\n",
		"# c\nversion: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: \"02:00:00:AA:BB:01\"\n",
		"network:\n  version: 2\n  ethernets:\n    net1: {dhcp4: yes}\n",
		"version: 2\nethernets:\n  a: &x {match: {macaddress: 02:00:00:aa:bb:02}}\n  b: *x\n  c: {<<: *x, set-name: net1}\n",
		"{\"version\": 1, \"config\": null}", "version: 1\nconfig:\n- [1, 2]\n- {? [a]: b}\n",
		"version: 2\nbonds: {net1: {interfaces: [eth0]}}\n", "a: &a [*a]\n", "version: 1\n---\n",
	} {
		f.Add(seed, "net1", "svc.cluster.local")
	}
	f.Add("version: 2\n", "evil\nversion: 3", "x\n- y")
	f.Add(mergeKeyChain(200), "net1", "s")
	f.Add("version: 2\nx: "+nestedJSON(MaxNestingDepth+1), "net1", "s")
	f.Add("version: 2\nx: [a"+strings.Repeat(",a", 3000)+"]", "net1", "s")
	f.Fuzz(func(t *testing.T, user, name, search string) {
		ifaces := fuzzIfaces(name, search)
		var out []byte
		var err error
		if alloc := allocated(func() { out, err = MergeNoCloud([]byte(user), ifaces) }); alloc > maxAllocated([]byte(user), 4<<10) {
			t.Fatalf("merging %d bytes allocated %d bytes", len(user), alloc)
		}
		if err != nil {
			errorNamesItsSource(t, err, "networkData", "interface")
			return
		}
		doc, err := decodeYAML(out)
		if err != nil || doc == nil {
			t.Fatalf("merged output does not parse: %v\n%s", err, out)
		}
		if err := userYAMLPreserved([]byte(user), out); err != nil {
			t.Fatalf("user entry lost: %v\nuser:\n%s\nout:\n%s", err, user, out)
		}
		extra, err := injectedKeys([]byte(user), out, false, ifaces)
		if err != nil || len(extra) > 0 {
			t.Fatalf("keys injected %q (%v)\nuser:\n%s\nout:\n%s", extra, err, user, out)
		}
	})
}

func FuzzMergeNetworkDataJSON(f *testing.F) {
	for _, seed := range []string{
		"", "null", "{}", `{"links":[],"networks":[],"services":[]}`,
		`{"links":[{"id":"net1","type":"phy","ethernet_mac_address":"02:00:00:AA:BB:01"}],"x":1.50}`,
		`{"links":[{"id":5,"name":"net2"},"str",null],"networks":[{"id":"net1-ipv4-0"}]}`,
		`{"links":null,"services":[{"type":"dns","address":"10.0.0.53"}]}`, `{"a":1,"a":2}`,
	} {
		f.Add(seed, "net1", "svc.cluster.local")
	}
	f.Add(`{"links":[]}`, `"},{"id":"x`, "a\"b")
	f.Add(`{"links":[],"x":`+nestedJSON(1000)+`}`, "net1", "s")
	f.Add(`{"links":[],"x":`+nestedJSON(MaxNestingDepth-2)+`}`, "net1", "s")
	f.Fuzz(func(t *testing.T, user, name, search string) {
		ifaces := fuzzIfaces(name, search)
		var out []byte
		var err error
		if alloc := allocated(func() { out, err = MergeNetworkDataJSON([]byte(user), ifaces) }); alloc > maxAllocated([]byte(user), 256) {
			t.Fatalf("merging %d bytes allocated %d bytes", len(user), alloc)
		}
		if err != nil {
			errorNamesItsSource(t, err, "networkData", "interface")
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
		if err := userJSONPreserved([]byte(user), out); err != nil {
			t.Fatalf("user entry lost: %v\nuser:\n%s\nout:\n%s", err, user, out)
		}
		extra, err := injectedKeys([]byte(user), out, true, ifaces)
		if err != nil || len(extra) > 0 {
			t.Fatalf("keys injected %q (%v)\nuser:\n%s\nout:\n%s", extra, err, user, out)
		}
	})
}

func FuzzApply(f *testing.F) {
	f.Add(noCloudInput, "net1", true)
	f.Add(configDriveInput, "net1", true)
	f.Add(noCloudInput, "net1", false)
	f.Add(`{"DataSource":"noCloud","UserData":"","NetworkData":"version: 2\n"}`, "x", true)
	f.Add(`{"datasource":"configDrive","networkdata":"{\"links\":[]}"}`, "net1", true)
	f.Add(`{"DataSource":"noCloud","UserData":"a","userData":"b"}`, "net1", true)
	f.Add(`null`, "", false)
	f.Fuzz(func(t *testing.T, data, name string, withIfaces bool) {
		var ifaces []model.BoundInterface
		if withIfaces {
			ifaces = fuzzIfaces(name, "svc.cluster.local")
		}
		out, err := Apply([]byte(data), ifaces)
		if err != nil {
			errorNamesItsSource(t, err, "cloudInitData", "interface")
			return
		}
		var in, got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &in); err != nil {
			t.Fatalf("Apply accepted invalid JSON")
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output is not a JSON object: %v", err)
		}
		if len(got) != len(in) && len(got) != len(in)+1 && len(got) != len(in)+2 {
			t.Fatalf("fields lost: %d -> %d", len(in), len(got))
		}
		for k, v := range in {
			if strings.EqualFold(k, fieldUserData) || strings.EqualFold(k, fieldNetworkData) {
				continue
			}
			if !jsonEqual(v, got[k]) {
				t.Fatalf("field %q changed: %s -> %s", k, v, got[k])
			}
		}
		key, err := fieldKey(got, fieldUserData)
		var text string
		if err == nil {
			err = json.Unmarshal(got[key], &text)
		}
		if err != nil || text == "" {
			t.Fatalf("UserData empty or unreadable (%v)", err)
		}
	})
}
