package model

import "github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"

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
	var s string
	if e.Interface != "" {
		s = "interface " + netval.Quote(e.Interface)
		if e.Network != "" {
			s += " (network " + netval.Quote(e.Network) + ")"
		}
		s += ": "
	}
	s += e.Source
	if e.Field != "" {
		s += " field " + e.Field
	}
	return s + ": " + e.Err.Error()
}

func (e *InputError) Unwrap() error { return e.Err }
