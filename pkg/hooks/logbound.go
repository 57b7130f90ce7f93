package hooks

import (
	"fmt"
	"unicode/utf8"
)

// Log lines stay short whatever the input: a VMI with hundreds of interfaces must not produce a
// 100 KB line (issue #15). Lists are logged as a count plus the first few names; error strings
// are cut. The full error still goes to virt-launcher in the gRPC status.
const (
	maxLoggedNames = 8
	maxLoggedError = 1024
)

// FirstNames returns at most maxLoggedNames of names, for a Handler's log lines (see firstNames).
func FirstNames(names []string) []string { return firstNames(names) }

// BoundedError is err's text cut for a log line (see boundedError).
func BoundedError(err error) string { return boundedError(err) }

// firstNames returns at most maxLoggedNames of names; the caller logs len(names) beside it.
func firstNames(names []string) []string {
	if len(names) <= maxLoggedNames {
		return names
	}
	return names[:maxLoggedNames]
}

// boundedError is err's text cut to maxLoggedError bytes (on a rune boundary), saying how long it was.
func boundedError(err error) string {
	s := err.Error()
	if len(s) <= maxLoggedError {
		return s
	}
	cut := maxLoggedError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes in all)", s[:cut], len(s))
}
