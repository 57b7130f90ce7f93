package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// The sidecar's logger bounds what pkg/binding and pkg/hooks log as they are: a long name list and a long
// error, while a panic's stack (a plain string) is kept whole.
func TestNewLogger_BoundsErrorsAndNameLists_KeepsOtherStrings(t *testing.T) {
	many := make([]string, 400)
	for i := range many {
		many[i] = fmt.Sprintf("vf%d", i)
	}
	var out strings.Builder
	stack := strings.Repeat("s", 4000)
	newLogger(&out, slog.LevelInfo).Warn("hook call", "missingCount", len(many), "missing", many,
		"error", errors.New(strings.Repeat("é", 2000)), "stack", stack)
	var line struct {
		Missing []string
		Error   string
		Stack   string
	}
	require.NoError(t, json.Unmarshal([]byte(out.String()), &line), out.String())
	assert.Equal(t, many[:maxLoggedNames], line.Missing)
	assert.True(t, strings.HasSuffix(line.Error, "...(4000 bytes in all)"), line.Error)
	assert.LessOrEqual(t, len(line.Error), maxLoggedError+40)
	assert.Equal(t, stack, line.Stack)
}

// nilPointerError is an error type whose Error dereferences its receiver.
type nilPointerError struct{ msg string }

func (e *nilPointerError) Error() string { return e.msg }

func TestBoundedError_ErrorMethodPanics_GivesAPlaceholder(t *testing.T) {
	var typed *nilPointerError
	var err error = typed
	assert.Contains(t, boundedError(err), "error text unavailable")

	var buf bytes.Buffer
	newLogger(&buf, slog.LevelInfo).Info("hook", "error", err)
	assert.Contains(t, buf.String(), "error text unavailable", "the line is still written")
}
