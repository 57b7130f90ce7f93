package model

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Pod interface naming, as KubeVirt's pkg/network/namescheme/networknamescheme.go does it.
const (
	hashedIfacePrefix  = "pod"
	hashedIfaceHexLen  = 11 // kernel IFNAMSIZ 15 minus the "-nic" suffix of the bridge binding
	primaryPodIface    = "eth0"
	ordinalIfacePrefix = "net"
)

// HashedPodInterfaceName returns the pod interface name KubeVirt gives a secondary Multus network:
// "pod" + the first 11 hex characters of sha256(VMI network name); equal to KubeVirt's
// namescheme.GenerateHashedInterfaceName (asserted in test/model).
func HashedPodInterfaceName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return hashedIfacePrefix + hex.EncodeToString(sum[:])[:hashedIfaceHexLen]
}

// BoundInterfaceNames returns the names of the VMI interfaces bound to bindingName, in spec order.
// Interfaces being hot-unplugged (state absent) are left out: KubeVirt removes their pod
// attachment, so there is nothing to wire or configure.
func BoundInterfaceNames(vmi *VirtualMachineInstance, bindingName string) []string {
	if vmi == nil || bindingName == "" {
		return nil
	}
	var names []string
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if isBound(iface, bindingName) {
			names = append(names, iface.Name)
		}
	}
	return names
}

func isBound(iface Interface, bindingName string) bool {
	return iface.Binding != nil && iface.Binding.Name == bindingName && iface.State != InterfaceStateAbsent
}

// binding is one bound interface resolved against the VMI spec alone.
type binding struct {
	iface   Interface
	network Network
	nad     string // the qualified "<ns>/<nad>" of multus.networkName
	// podNetworksKey is the k8s.ovn.org/pod-networks key: nad, or "<nad>/<n>" for the n-th (n >= 1)
	// attachment of the same NAD (OVN-K util.GetIndexedNADKey).
	podNetworksKey string
	// hashedIface and ordinalIface are the pod interface names under KubeVirt's two name schemes.
	hashedIface  string
	ordinalIface string
}

// resolveBindings resolves every bound interface to its network, NAD and pod interface names. The
// errors are wrong VMI input: a bound interface whose network is missing or not Multus, hostile names.
func resolveBindings(vmi *VirtualMachineInstance, bindingName string) ([]binding, error) {
	if vmi == nil {
		return nil, &InputError{Source: SourceVMI, Err: errors.New("no VMI")}
	}
	if bindingName == "" {
		return nil, &InputError{Source: "options", Field: "BindingName", Err: errors.New("empty binding name")}
	}
	networks := map[string]Network{}
	// Multus secondary networks in spec order give the ordinal names (net1, net2, ...) and the
	// per-NAD attachment index, as KubeVirt builds k8s.v1.cni.cncf.io/networks in that order
	// (pkg/network/multus/annotation.go).
	ordinal := map[string]string{}
	nadIndex := map[string]int{}
	nadSeen := map[string]int{}
	absent := map[string]bool{}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.State == InterfaceStateAbsent {
			absent[iface.Name] = true
		}
	}
	secondary := 0
	for _, n := range vmi.Spec.Networks {
		if _, dup := networks[n.Name]; dup {
			continue // first wins; KubeVirt's admission rejects duplicate network names
		}
		networks[n.Name] = n
		if n.Multus == nil || n.Multus.Default {
			continue
		}
		secondary++
		ordinal[n.Name] = ordinalIfacePrefix + strconv.Itoa(secondary)
		if absent[n.Name] {
			continue
		}
		nad, err := qualifyNAD(n.Multus.NetworkName, vmi.Namespace)
		if err != nil {
			continue // reported below if the network is bound to us; not ours to judge otherwise
		}
		nadIndex[n.Name] = nadSeen[nad]
		nadSeen[nad]++
	}

	var out []binding
	for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if !isBound(iface, bindingName) {
			continue
		}
		fail := func(field string, err error) error {
			return &InputError{Interface: iface.Name, Network: iface.Name, Source: SourceVMI, Field: field, Err: err}
		}
		if !ValidInterfaceName(iface.Name) {
			return nil, fail(fmt.Sprintf("spec.domain.devices.interfaces[%d].name", i),
				fmt.Errorf("invalid interface name %s: only letters, digits, '-' and '_' are allowed", netval.Quote(iface.Name)))
		}
		// A VMI interface uses the network of the same name (KubeVirt pkg/network/vmispec).
		n, ok := networks[iface.Name]
		if !ok {
			return nil, fail("spec.networks", errors.New("no network with the interface's name"))
		}
		if n.Multus == nil {
			return nil, fail("spec.networks[].multus", errors.New("the network is not a Multus network; this binding needs a Multus NetworkAttachmentDefinition"))
		}
		nad, err := qualifyNAD(n.Multus.NetworkName, vmi.Namespace)
		if err != nil {
			return nil, fail("spec.networks[].multus.networkName", err)
		}
		b := binding{iface: iface, network: n, nad: nad, podNetworksKey: nad}
		if n.Multus.Default {
			b.hashedIface, b.ordinalIface = primaryPodIface, primaryPodIface
		} else {
			b.hashedIface, b.ordinalIface = HashedPodInterfaceName(n.Name), ordinal[n.Name]
			if idx := nadIndex[n.Name]; idx > 0 {
				b.podNetworksKey = nad + "/" + strconv.Itoa(idx)
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// qualifyNAD turns multus.networkName ("<nad>" or "<ns>/<nad>") into "<ns>/<nad>", defaulting the
// namespace to the VMI's (KubeVirt pkg/network/multus/nad.go NetAttachDefNamespacedName).
func qualifyNAD(networkName, vmiNamespace string) (string, error) {
	ns, name, qualified := strings.Cut(networkName, "/")
	if !qualified {
		ns, name = vmiNamespace, networkName
	}
	if len(ns) > 63 || !isRFC1123Label(ns) { // the Kubernetes rule for namespace names
		if !qualified && ns == "" {
			return "", fmt.Errorf("network name %s has no namespace and the VMI has none", netval.Quote(networkName))
		}
		return "", fmt.Errorf("invalid namespace in network name %s", netval.Quote(networkName))
	}
	if !isDNSSubdomain(name) {
		return "", fmt.Errorf("invalid NetworkAttachmentDefinition name in network name %s", netval.Quote(networkName))
	}
	return ns + "/" + name, nil
}

// ValidInterfaceName is KubeVirt's interface/network name rule (pkg/network/admitter/netiface.go
// validateInterfaceNameFormat): non-empty, letters, digits, '-' and '_' only. Such a name cannot hold
// '.', '/', NUL or XML metacharacters, which is what pkg/domain (an alias attribute) and
// pkg/ifacecache (a file name) rely on; this is the one place the rule lives.
func ValidInterfaceName(s string) bool {
	return s != "" && onlyBytesOf(s, lowerAlnum+"ABCDEFGHIJKLMNOPQRSTUVWXYZ-_")
}

const lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"

// onlyBytesOf reports whether every byte of s is in the ASCII set.
func onlyBytesOf(s, set string) bool { return strings.Trim(s, set) == "" }

// isDNSSubdomain is RFC 1123 subdomain validation, the Kubernetes rule for NAD names: 253 bytes of
// labels (without the 63-byte bound of a single label).
func isDNSSubdomain(s string) bool {
	return len(s) <= 253 && !slices.ContainsFunc(strings.Split(s, "."), func(l string) bool { return !isRFC1123Label(l) })
}

// isRFC1123Label accepts lower-case letters, digits and '-', with a letter or digit at both ends.
func isRFC1123Label(s string) bool {
	return s != "" && s[0] != '-' && s[len(s)-1] != '-' && onlyBytesOf(s, lowerAlnum+"-")
}
