package ifacecache

import (
	"errors"
	"fmt"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// maxNameLen bounds interface names and VMI UIDs. KubeVirt itself sets no length limit on
// interface names (pkg/network/admitter/netiface.go validateInterfaceNameFormat checks the
// character set only), but a name becomes a file name here, and its temp twin
// ("." + name + ".tmp-" + up to 10 random digits) must stay within NAME_MAX (255 bytes).
const maxNameLen = 200

// ErrInvalidName is wrapped by every error ValidateName returns.
var ErrInvalidName = errors.New("invalid name")

// ValidateName refuses a name that must not become a path element: empty, longer than 200 bytes,
// or outside KubeVirt's interface-name character set. kind names what the value is ("interface",
// "vmi uid") so the error says which input was refused.
func ValidateName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty: %w", kind, ErrInvalidName)
	case len(name) > maxNameLen:
		return fmt.Errorf("%s name is %d bytes, limit %d: %w", kind, len(name), maxNameLen, ErrInvalidName)
	// KubeVirt's interface-name rule (model.ValidInterfaceName) excludes '.', '/' and NUL, so no
	// name that passes can be "..", contain a separator, or collide with our dot-prefixed temp
	// files. Kubernetes UIDs (UUIDs) pass it as well.
	case !model.ValidInterfaceName(name):
		return fmt.Errorf("%s name %q may only contain letters, digits, '-' and '_' (KubeVirt's interface name rule): %w",
			kind, name, ErrInvalidName)
	}
	return nil
}
