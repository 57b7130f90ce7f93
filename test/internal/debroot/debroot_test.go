package debroot

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSpecKey_NamesTheContent(t *testing.T) {
	base := Spec{Suite: "trixie", Mirror: "http://m", Packages: []string{"a", "b"}}
	tests := []struct {
		name string
		spec Spec
		same bool
	}{
		{"package order does not matter", Spec{Suite: "trixie", Mirror: "http://m", Packages: []string{"b", "a"}}, true},
		{"another package", Spec{Suite: "trixie", Mirror: "http://m", Packages: []string{"a", "c"}}, false},
		{"another suite", Spec{Suite: "bookworm", Mirror: "http://m", Packages: []string{"a", "b"}}, false},
		{"another mirror", Spec{Suite: "trixie", Mirror: "http://n", Packages: []string{"a", "b"}}, false},
		{"another tool", Spec{Suite: "trixie", Mirror: "http://m", Packages: []string{"a", "b"}, Tool: "mmdebstrap"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, base.Key() == tc.spec.Key())
		})
	}
}

func TestSpecKey_EmptyMirrorIsTheDefault(t *testing.T) {
	t.Setenv("GUEST_DEBIAN_MIRROR", "")
	assert.Equal(t, Spec{Suite: "trixie", Mirror: DefaultMirror()}.Key(), Spec{Suite: "trixie"}.Key())
}
