package downwardapi

import (
	"errors"
	"fmt"
	"strings"
)

// ErrClosed is the cause of a MissingError returned because the Watcher was closed.
var ErrClosed = errors.New("downwardapi watcher closed")

// FieldError is a parse or validation failure at one field of one source. Every parser returns it
// (possibly wrapped), so callers can tell which file or annotation, which network and which field.
type FieldError struct {
	Source string // file path or annotation key
	Key    string // network / map key / line the field belongs to, "" for the whole source
	Field  string // e.g. "ip_addresses[1]"; "" when the whole source is malformed
	Err    error
}

// Error reads "<source>[: <key>][: field <field>]: <cause>".
func (e *FieldError) Error() string {
	s := e.Source
	if e.Key != "" {
		s += ": " + e.Key
	}
	if e.Field != "" {
		s += ": field " + e.Field
	}
	return s + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// String renders one missing item as "interface X (network Y): <source> <field>".
func (m Missing) String() string {
	what := m.Source
	if m.Field != "" {
		what += " " + m.Field
	}
	switch {
	case m.Interface != "" && m.Network != "":
		return fmt.Sprintf("interface %s (network %s): %s", m.Interface, m.Network, what)
	case m.Interface != "":
		return fmt.Sprintf("interface %s: %s", m.Interface, what)
	case m.Network != "":
		return fmt.Sprintf("network %s: %s", m.Network, what)
	}
	return what
}

// MissingError is returned by Watcher.Wait when the context ends (or the watcher closes) before the
// snapshot holds everything the caller needs.
type MissingError struct {
	Items []Missing
	// Problems are the parse errors of the last snapshot: often the reason an item is missing.
	Problems []error
	Err      error // ctx.Err() or ErrClosed
}

func (e *MissingError) Error() string {
	lines := []string{fmt.Sprintf("DownwardAPI data still missing (%v): %d item(s)", e.Err, len(e.Items))}
	for _, m := range e.Items {
		lines = append(lines, m.String())
	}
	for _, p := range e.Problems {
		lines = append(lines, "problem: "+p.Error())
	}
	return strings.Join(lines, "\n  ")
}

func (e *MissingError) Unwrap() error { return e.Err }
