package downwardapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// The fuzz targets check that no input panics and that what parses is self-consistent. Seeds are added
// here and committed under testdata/fuzz/<Target>/.

func FuzzParseNetworkInfo(f *testing.F) {
	for _, s := range []string{"", " \n", networkInfoExample, `{"interfaces":[]}`, `{"interfaces":[{"network":"a","mac":"zz"}]}`,
		`{"interfaces":[{"network":"a","deviceInfo":{"type":"vdpa","vdpa":{"pci-address":"0000:00:1f.7"}}}]}`, `null`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ParseNetworkInfo("fuzz", data)
		if err != nil || info == nil {
			return
		}
		again, err := json.Marshal(info)
		if err != nil {
			t.Fatalf("marshal of parsed value: %v", err)
		}
		if _, err := ParseNetworkInfo("fuzz", again); err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
	})
}

func FuzzParseFormatMap(f *testing.F) {
	for _, s := range []string{"", `a="1"`, "a=\"1\"\nb=\"x\\ny\\\"z\"", `k="\u00e9\xff"`, "a=1", `="x"`, "a=\"1\"\n", "a=\"\\q\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseFormatMap("fuzz", data)
		if err != nil {
			return
		}
		// Whatever parses must survive kubelet's formatting unchanged.
		back, err := ParseFormatMap("fuzz", []byte(formatMap(m)))
		if err != nil {
			t.Fatalf("re-parse of formatted %q: %v", m, err)
		}
		if len(back) != len(m) {
			t.Fatalf("round trip changed size: %d -> %d", len(m), len(back))
		}
		for k, v := range m {
			if back[k] != v {
				t.Fatalf("round trip changed %q: %q -> %q", k, v, back[k])
			}
		}
	})
}

func FuzzFormatMapRoundTrip(f *testing.F) {
	f.Add("app", "vm")
	f.Add("k8s.v1.cni.cncf.io/network-status", "[{\n \"name\": \"a\\b\"}]")
	f.Add("u", "héllo \x00 \xff 世界")
	f.Fuzz(func(t *testing.T, key, value string) {
		// Kubernetes label and annotation keys never contain '=' or a newline and are never empty.
		if key == "" || strings.ContainsAny(key, "=\n") {
			return
		}
		m, err := ParseFormatMap("fuzz", []byte(formatMap(map[string]string{key: value, "zz-other": "x"})))
		if err != nil {
			t.Fatalf("parse of formatted map: %v", err)
		}
		if m[key] != value {
			t.Fatalf("value of %q: got %q, want %q", key, m[key], value)
		}
	})
}

func FuzzParseNetworkStatus(f *testing.F) {
	for _, s := range []string{"", "[]", networkStatusExample, `[{"name":"a","ips":["1.2.3.4/24"]}]`, `[{"name":"a","mtu":-5}]`, `{}`, `[null]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseNetworkStatus(data)
		if err != nil {
			return
		}
		for i, s := range st {
			if CheckNetworkStatusEntry(i, s) != nil {
				continue
			}
			if s.Name == "" {
				t.Fatalf("accepted an entry without name: %+v", s)
			}
			for _, ip := range s.IPs {
				if _, err := netval.ParseAddr(ip); err != nil {
					t.Fatalf("accepted invalid ip %q", ip)
				}
			}
		}
	})
}

func FuzzParsePodNetworks(f *testing.F) {
	for _, s := range []string{"", "{}", podNetworksExample, `{"a":null}`, `{"a":{"mac_address":"02:00:00:00:00:01","routes":[{"dest":"::/0"}]}}`,
		`{"a":{"mac_address":"02:00:00:00:00:01","ip_addresses":["::ffff:1.2.3.4/120"]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pn, err := ParsePodNetworks(data)
		if err != nil {
			return
		}
		for name, n := range pn {
			// n.MAC is a netval.MAC: 48 bits by type, so only the key is left to check.
			if name == "" {
				t.Fatalf("accepted entry %q with MAC %v", name, n.MAC)
			}
			for _, p := range n.IPAddresses {
				if !p.IsValid() {
					t.Fatalf("accepted invalid prefix in %q", name)
				}
			}
			for _, r := range n.Routes {
				if r.Dest.Bits() == 0 {
					t.Fatalf("accepted a default route in %q", name)
				}
			}
		}
	})
}
