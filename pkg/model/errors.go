package model

import (
	"fmt"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Source names used in InputError and downwardapi.Missing for inputs that are not annotations.
const (
	SourceVMI            = "vmi"
	SourcePodIPEnv       = "env MY_POD_IP"
	SourceDeviceInfoFile = "device-info file"
)

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
		fmt.Fprintf(&b, "interface %s", netval.Quote(e.Interface))
		if e.Network != "" {
			fmt.Fprintf(&b, " (network %s)", netval.Quote(e.Network))
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
