package ifacecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// PodIfaceCacheData has the JSON shape of KubeVirt's cache.PodIfaceCacheData
// (pkg/network/cache/podinterface.go), so KubeVirt's own reader reads what Writer writes and
// MergeInterfaceStatus can take what virt-handler reads. Defined here because this package must not
// import kubevirt.io/kubevirt; test/ifacecache proves the two agree.
type PodIfaceCacheData struct {
	// Iface is the VMI's interface spec (KubeVirt: *v1.Interface) as the VMI JSON carried it.
	Iface  json.RawMessage `json:"iface,omitempty"`
	PodIP  string          `json:"podIP,omitempty"`
	PodIPs []string        `json:"podIPs,omitempty"`
	// State is virt-handler's network preparation state (cache.PodIfaceState). Writer never sets
	// it; it is kept so entries read from virt-handler's own cache round-trip unchanged.
	State int `json:"networkState,omitempty"`
}

// Entry is one cache file Writer wants on disk: the interface name (the file name) and the content.
type Entry struct {
	Name string
	Data PodIfaceCacheData
}

// BuildEntries decides the cache content for each bound interface: pure, no I/O. Like virt-handler
// (pkg/network/setup/netpod/discover.go), it keeps the first global-unicast address of each family,
// primary family first, and writes nothing for an interface without one (DHCP with no known
// address, link-local only). iface is the VMI's interface spec of the same name, or just the name
// when the spec lacks it. Names are validated; an invalid or duplicate name is an error naming it,
// and the other interfaces are still returned.
func BuildEntries(specIfaces []model.Interface, bound []model.BoundInterface, primary model.Family) ([]Entry, error) {
	specByName := make(map[string]model.Interface, len(specIfaces))
	for _, s := range specIfaces {
		specByName[s.Name] = s
	}
	var errs []error
	seen := make(map[string]bool, len(bound))
	entries := make([]Entry, 0, len(bound))
	for _, b := range bound {
		if err := ValidateName("interface", b.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[b.Name] {
			errs = append(errs, fmt.Errorf("interface %q is bound twice: %w", b.Name, ErrInvalidName))
			continue
		}
		seen[b.Name] = true
		ips := podIPs(b.Addresses, primary)
		if len(ips) == 0 {
			continue
		}
		iface, err := specJSON(specByName[b.Name], b.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, Entry{
			Name: b.Name,
			Data: PodIfaceCacheData{Iface: iface, PodIP: ips[0], PodIPs: ips},
		})
	}
	return entries, errors.Join(errs...)
}

// specJSON is the interface spec as the VMI carried it, compacted; just {"name":...} when the VMI
// JSON did not carry one (KubeVirt's reader then sees an Interface with only its name).
func specJSON(spec model.Interface, name string) (json.RawMessage, error) {
	if len(spec.Raw) == 0 {
		raw, err := json.Marshal(struct {
			Name string `json:"name"`
		}{name})
		return raw, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, spec.Raw); err != nil {
		return nil, fmt.Errorf("interface %q: VMI interface spec: %w", name, err)
	}
	return buf.Bytes(), nil
}

// podIPs returns the first global-unicast address of each family, primary family first.
func podIPs(addrs []netip.Prefix, primary model.Family) []string {
	var v4, v6 string
	for _, p := range addrs {
		a := p.Addr().Unmap()
		if !a.IsValid() || !a.IsGlobalUnicast() {
			continue
		}
		switch {
		case a.Is4() && v4 == "":
			v4 = a.String()
		case a.Is6() && v6 == "":
			v6 = a.WithZone("").String()
		}
	}
	first, second := v4, v6
	if primary == model.IPv6 {
		first, second = v6, v4
	}
	return slices.DeleteFunc([]string{first, second}, func(ip string) bool { return ip == "" })
}

// Encode renders the entry file the way KubeVirt's writer does (pkg/network/cache/cache.go
// writeToCachedFile: json.MarshalIndent with two spaces), so files are byte-comparable with
// virt-handler's own. The render subcommand prints it too.
func (e Entry) Encode() ([]byte, error) {
	buf, err := json.MarshalIndent(e.Data, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode cache entry for interface %q: %w", e.Name, err)
	}
	return buf, nil
}

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
