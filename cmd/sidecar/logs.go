package main

import (
	"fmt"
	"io"
	"log/slog"
	"unicode/utf8"
)

// Log lines stay short whatever the input: a VMI with hundreds of interfaces must not produce a 100 KB
// line. The logger does it for every package, so pkg/binding and pkg/hooks log errors and name lists as
// they are: a list is cut to its first few names (the caller logs its length beside it), an error's text
// to maxLoggedError bytes. The full error still goes to virt-launcher in the gRPC status.
const (
	maxLoggedNames = 8
	maxLoggedError = 1024
)

// newLogger is the sidecar's logger: one JSON line per event on w, values bounded (boundLogValue).
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: boundLogValue}))
}

// boundLogValue cuts an error value and a list of names; other values (a panic's stack among them) pass.
func boundLogValue(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value.Any().(type) {
	case error:
		a.Value = slog.StringValue(boundedError(v))
	case []string:
		a.Value = slog.AnyValue(firstNames(v))
	}
	return a
}

// firstNames returns at most maxLoggedNames of names.
func firstNames(names []string) []string { return names[:min(len(names), maxLoggedNames)] }

// boundedError is err's text cut to maxLoggedError bytes (on a rune boundary), saying how long it was.
// An Error method that panics (a nil pointer in a non-nil interface) gives a placeholder: a log line must
// never take the process down.
func boundedError(err error) (text string) {
	defer func() {
		if r := recover(); r != nil {
			text = fmt.Sprintf("<error text unavailable: %v>", r)
		}
	}()
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
