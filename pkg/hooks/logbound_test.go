package hooks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestFirstNames_BoundsLongLists(t *testing.T) {
	many := make([]string, 400)
	for i := range many {
		many[i] = fmt.Sprintf("vf%d", i)
	}
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"nil", nil, nil},
		{"short list unchanged", many[:3], many[:3]},
		{"400 items: the first few", many, many[:maxLoggedNames]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, firstNames(tt.in))
		})
	}
}

func TestBoundedError_CutsOnARuneBoundaryAndSaysTheLength(t *testing.T) {
	short := errors.New("short")
	assert.Equal(t, "short", boundedError(short))

	long := errors.New(strings.Repeat("é", 2000)) // 4000 bytes, two per rune
	got := boundedError(long)
	assert.LessOrEqual(t, len(got), maxLoggedError+40)
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasSuffix(got, "...(4000 bytes in all)"), got)
}
