package model

import (
	"fmt"
	"strings"
)

// Source names used in InputError and downwardapi.Missing for inputs that are not annotations.
const (
	SourceVMI            = "vmi"
	SourcePodIPEnv       = "env MY_POD_IP"
	SourceDeviceInfoFile = "device-info file"
)

// maxQuoted bounds how much of an untrusted value an error message repeats.
const maxQuoted = 64

// InputError is wrong (not late) input for one bound interface: it names the interface, its VMI
// network, the source (VMI, annotation key, file) and the field, and quotes the offending value.
type InputError struct {
	Interface string
	Network   string
	Source    string
	Field     string
	Err       error
}

func (e *InputError) Error() string {
	var b strings.Builder
	if e.Interface != "" {
		fmt.Fprintf(&b, "interface %s", quote(e.Interface))
		if e.Network != "" {
			fmt.Fprintf(&b, " (network %s)", quote(e.Network))
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Source)
	if e.Field != "" {
		b.WriteString(" field ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *InputError) Unwrap() error { return e.Err }

// quote renders an untrusted value for a message: Go-quoted (control characters escaped) and truncated.
func quote(s string) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q...(%d bytes)", s[:maxQuoted], len(s))
	}
	return fmt.Sprintf("%q", s)
}
