package downwardapi_test

import (
	"strings"
	"testing"

	"k8s.io/kubernetes/pkg/fieldpath"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// FuzzParseFormatMap_KubeletFormatMap checks the parser against kubelet's real formatter: any value
// kubelet can project reads back exactly.
func FuzzParseFormatMap_KubeletFormatMap(f *testing.F) {
	f.Add("app", "vm", "b", "")
	f.Add("k8s.v1.cni.cncf.io/network-status", "[{\n \"name\": \"a\\\\b\"}]", "z", "\"")
	f.Add("u", "héllo \x00 \xff 世界", "v", "\u2028\t")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		// Kubernetes label and annotation keys are qualified names: never empty, never '=' or newline.
		for _, k := range []string{k1, k2} {
			if k == "" || strings.ContainsAny(k, "=\n") {
				return
			}
		}
		want := map[string]string{k1: v1, k2: v2}
		got, err := downwardapi.ParseFormatMap("fuzz", []byte(fieldpath.FormatMap(want)))
		if err != nil {
			t.Fatalf("parse of kubelet's FormatMap(%q): %v", want, err)
		}
		if len(got) != len(want) {
			t.Fatalf("got %d keys, want %d", len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("key %q: got %q, want %q", k, got[k], v)
			}
		}
	})
}
