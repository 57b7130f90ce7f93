package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// NetworksAnnotation is the pod's network selection, which Multus reads (KubeVirt writes it on virt-launcher
// pods in the JSON form, pkg/network/multus/annotation.go).
const NetworksAnnotation = nadv1.NetworkAttachmentAnnot

// hashLen is the number of hex digits KubeVirt keeps of sha256 in pod interface names
// (kubevirt.io/kubevirt@v1.8.4 pkg/network/namescheme/networknamescheme.go GenerateHashedInterfaceName).
const hashLen = 11

// hashedPodIfaceName is KubeVirt's pod interface name for a VMI network: "pod" + 11 hex of sha256(name).
func hashedPodIfaceName(network string) string {
	return "pod" + hex11(network)
}

// tapName is the name of the TAP standing in for the VF of a pod interface: "vf" + 11 hex of
// sha256(pod interface name) (13 bytes, within IFNAMSIZ).
func tapName(podIface string) string {
	return "vf" + hex11(podIface)
}

func hex11(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// dns1123Label is Multus' rule for each part of the short form (network-attachment-definition-client
// v1.7.7 pkg/utils/net-attach-def.go parsePodNetworkObjectText).
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// parseNetworkSelections parses k8s.v1.cni.cncf.io/networks in both forms Multus accepts, with Multus'
// rules (the same file, ParseNetworkAnnotation): a JSON list when the value holds any of `[{"`, else a
// comma-separated list of `[<namespace>/]<name>[@<interface>]`. A missing namespace is the pod's.
func parseNetworkSelections(value, podNamespace string) ([]nadv1.NetworkSelectionElement, error) {
	fail := func(err error) error {
		return fmt.Errorf("annotation %s: %w", NetworksAnnotation, err)
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	var out []nadv1.NetworkSelectionElement
	if strings.ContainsAny(value, `[{"`) {
		if err := json.Unmarshal([]byte(value), &out); err != nil {
			return nil, fail(fmt.Errorf("invalid JSON: %w", err))
		}
	} else {
		for i, item := range strings.Split(value, ",") {
			sel, err := parseShortSelection(strings.TrimSpace(item))
			if err != nil {
				return nil, fail(fmt.Errorf("item %d %s: %w", i, netval.Quote(item), err))
			}
			out = append(out, sel)
		}
	}
	for i := range out {
		if out[i].Namespace == "" {
			out[i].Namespace = podNamespace
		}
		if out[i].Name == "" {
			return nil, fail(fmt.Errorf("entry %d has no name", i))
		}
		if out[i].InterfaceRequest != "" {
			if err := checkIfName(out[i].InterfaceRequest); err != nil {
				return nil, fail(fmt.Errorf("entry %d (%s/%s) interface: %w", i, out[i].Namespace, out[i].Name, err))
			}
		}
	}
	return out, nil
}

func parseShortSelection(item string) (nadv1.NetworkSelectionElement, error) {
	var sel nadv1.NetworkSelectionElement
	rest := item
	if ns, name, ok := strings.Cut(item, "/"); ok {
		if strings.Contains(name, "/") {
			return sel, errors.New("more than one '/'")
		}
		sel.Namespace, rest = strings.TrimSpace(ns), name
	}
	name, iface, ok := strings.Cut(rest, "@")
	if ok && strings.Contains(iface, "@") {
		return sel, errors.New("more than one '@'")
	}
	sel.Name, sel.InterfaceRequest = strings.TrimSpace(name), strings.TrimSpace(iface)
	for _, part := range []string{sel.Namespace, sel.Name, sel.InterfaceRequest} {
		if part != "" && !dns1123Label.MatchString(part) {
			return sel, fmt.Errorf("%s is not a DNS-1123 label", netval.Quote(part))
		}
	}
	return sel, nil
}

// NADConfig is what this plugin reads of a NetworkAttachmentDefinition's spec.config: a single plugin
// config or a conflist, whose first plugin decides.
type NADConfig struct {
	Name     string // the CNI network name (host-local keeps its leases under it)
	Type     string // "sriov", "bridge", "none", anything else
	DeviceID string // sriov: the VF's PCI address, e.g. 0000:65:00.2
	Bridge   string // bridge: the node's Linux bridge the pod's link joins
	// MTU (sriov, "mtu"; 0 = absent) is the VF's MTU: on a node the SR-IOV operator's policy sets it on the
	// VF, and SR-IOV CNI reports it in its result, which Multus copies into network-status "mtu".
	MTU  int
	IPAM json.RawMessage // nil when the config has none
	// Role is OVN-K's NAD config role ("primary" or "secondary"; "" = secondary), which decides the
	// pod-networks roles (go-controller/pkg/util/pod_annotation.go, PodAnnotation.Role).
	Role string
}

// The sriov NAD type, the bridge one (a veth on a node bridge, by the Debian bridge plugin, without
// addresses: KubeVirt's bridge binding), and the `none` stand-in for a network this plugin lists without a
// device.
const (
	typeSRIOV  = "sriov"
	typeBridge = "bridge"
	typeNone   = "none"
)

type nadPluginJSON struct {
	Type     string          `json:"type"`
	DeviceID string          `json:"deviceID"`
	Bridge   string          `json:"bridge"`
	MTU      int             `json:"mtu"`
	IPAM     json.RawMessage `json:"ipam"`
	Role     string          `json:"role"`
}

// parseNADConfig decodes spec.config of the NAD ns/name.
func parseNADConfig(ns, name, config string) (NADConfig, error) {
	fail := func(err error) error {
		return fmt.Errorf("NetworkAttachmentDefinition %s/%s spec.config: %w", ns, name, err)
	}
	var top struct {
		nadPluginJSON
		Name    string          `json:"name"`
		Plugins []nadPluginJSON `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(config), &top); err != nil {
		return NADConfig{}, fail(fmt.Errorf("invalid JSON: %w", err))
	}
	p := top.nadPluginJSON
	if len(top.Plugins) > 0 {
		p = top.Plugins[0]
	}
	c := NADConfig{Name: top.Name, Type: p.Type, DeviceID: p.DeviceID, Bridge: p.Bridge, Role: p.Role, MTU: p.MTU}
	if c.Name == "" {
		c.Name = name
	}
	if len(p.IPAM) > 0 && string(p.IPAM) != "null" && string(p.IPAM) != "{}" {
		c.IPAM = p.IPAM
	}
	switch c.Role {
	case "", roleSecondary, rolePrimary:
	default:
		return NADConfig{}, fail(fmt.Errorf("role %s is neither %s nor %s", netval.Quote(c.Role), rolePrimary, roleSecondary))
	}
	if c.Type == typeSRIOV {
		if _, err := netval.ParsePCIAddress(c.DeviceID); err != nil {
			return NADConfig{}, fail(fmt.Errorf("deviceID: %w", err))
		}
	}
	if c.Type == typeBridge {
		if err := checkIfName(c.Bridge); err != nil {
			return NADConfig{}, fail(fmt.Errorf("bridge: %w", err))
		}
		if c.IPAM != nil {
			return NADConfig{}, fail(errors.New("ipam: a bridge network here is layer 2 only (KubeVirt's bridge binding)"))
		}
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
		return NADConfig{}, fail(fmt.Errorf("mtu %d is outside 68-65535", c.MTU))
	}
	if c.Type == "" {
		return NADConfig{}, fail(errors.New("type is empty"))
	}
	return c, nil
}
