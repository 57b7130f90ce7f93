package ifacecache

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateName_AcceptsKubeVirtInterfaceNamesAndUIDs(t *testing.T) {
	for _, name := range []string{
		"net1", "default", "a", "sriov-udn_0", "NET-1",
		"0b3c8e5e-6f3a-4c8e-9a52-2f4b6c1d9e7f", // a Kubernetes UID
		strings.Repeat("a", maxNameLen),
	} {
		assert.NoError(t, ValidateName("interface", name), "name %q", name)
	}
}

func TestValidateName_RefusesHostileNamesWithErrorNamingTheKind(t *testing.T) {
	tests := []struct {
		name  string
		input string
	}{
		{"empty", ""},
		{"dot dot", ".."},
		{"dot", "."},
		{"parent traversal", "../x"},
		{"slash", "a/b"},
		{"absolute path", "/etc/passwd"},
		{"backslash", `a\b`},
		{"NUL byte", "a\x00b"},
		{"newline", "net1\n"},
		{"space", "net 1"},
		{"dot inside", "net.1"},
		{"non-ASCII", "netä"},
		{"300 bytes", strings.Repeat("a", 300)},
		{"one byte over the limit", strings.Repeat("a", maxNameLen+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName("vmi uid", tt.input)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidName)
			assert.Contains(t, err.Error(), "vmi uid")
		})
	}
}

func FuzzValidateName(f *testing.F) {
	for _, seed := range []string{"net1", "..", "../x", "a/b", "", strings.Repeat("a", 300), "a\x00", ".net1.tmp-1"} {
		f.Add(seed)
	}
	const base = "/cache/uid"
	f.Fuzz(func(t *testing.T, name string) {
		if ValidateName("interface", name) != nil {
			return
		}
		// Whatever passes is one plain path element below base and cannot be a temp file name.
		joined := filepath.Join(base, name)
		if filepath.Dir(joined) != base || filepath.Base(joined) != name {
			t.Fatalf("accepted name %q escapes %s: %s", name, base, joined)
		}
		if strings.HasPrefix(name, ".") || len(name) > maxNameLen {
			t.Fatalf("accepted name %q: dot-prefixed or too long", name)
		}
	})
}
