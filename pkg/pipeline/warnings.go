package pipeline

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Warning is a case where the sidecar does what it was told but the result is probably not what the
// operator meant. It never fails a hook: the hooks log it (one WARN line with these fields) and
// `render` prints it. Message names VMI fields and annotation keys, never annotation values.
type Warning struct {
	Code      string `json:"code"`
	Interface string `json:"interface,omitempty"`
	Message   string `json:"message"`
}

// Warning codes.
const (
	// WarnNothingBound: no VMI interface uses this binding (core `sriov: {}`, or a wrong --binding-name).
	WarnNothingBound = "nothing-bound"
	// WarnNoCloudInitVolume: virt-launcher v1.8 dereferences a nil cloud-init payload and panics before
	// PreCloudInitIso reaches us (pkg/hooks/manager.go preCloudInitIsoDataToJSON).
	WarnNoCloudInitVolume = "no-cloud-init-volume"
	// WarnMACMismatch: the VMI macAddress wins over the network-status mac of the same interface (or, with
	// no network-status, over the network-info mac).
	WarnMACMismatch = "mac-mismatch"
	// WarnNetworkInfoMismatch: network-info (device-info file or kubevirt.io/network-info, KubeVirt's copy
	// of network-status) disagrees with network-status on mac or mtu; network-status wins.
	WarnNetworkInfoMismatch = "network-info-mismatch"
	// WarnUserNetworkDataWins: the user's networkData configures one of our NICs, so ours is left out.
	WarnUserNetworkDataWins = "user-network-data-wins"
	// WarnPodMACMismatch: the domain's pod-network NIC has another MAC than the pod interface whose MAC
	// the guest's network config matches (masquerade or bridge without macAddress).
	WarnPodMACMismatch = "pod-mac-mismatch"
	// WarnNetworkDataInSecret: render cannot read a networkDataSecretRef (virt-launcher can).
	WarnNetworkDataInSecret = "network-data-in-secret"
)

// coreBindings are the VMI interface fields that select one of KubeVirt's own bindings
// (kubevirt.io/api core/v1 InterfaceBindingMethod).
var coreBindings = []string{"bridge", "slirp", "masquerade", "sriov", "macvtap", "passt"}

func nothingBound(vmi *model.VirtualMachineInstance, opts model.Options) []Warning {
	if vmi == nil {
		return nil
	}
	uses := make([]string, 0, len(vmi.Spec.Domain.Devices.Interfaces))
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		uses = append(uses, fmt.Sprintf("%s uses %s", iface.Name, bindingOf(iface)))
	}
	msg := fmt.Sprintf("no interface of the VMI is bound to binding %q, so nothing is wired or configured", opts.BindingName)
	if len(uses) > 0 {
		msg += " (" + strings.Join(uses, "; ") + ")"
	} else {
		msg += " (the VMI has no interfaces)"
	}
	return []Warning{{Code: WarnNothingBound, Message: msg + ": check spec.domain.devices.interfaces[].binding.name and --binding-name"}}
}

// bindingOf says which binding an interface uses, for the nothing-bound warning.
func bindingOf(iface model.Interface) string {
	if iface.State == model.InterfaceStateAbsent {
		return "nothing (state absent: being unplugged)"
	}
	if iface.Binding != nil {
		return fmt.Sprintf("binding plugin %q", iface.Binding.Name)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(iface.Raw, &fields) == nil {
		for _, b := range coreBindings {
			if _, ok := fields[b]; ok {
				return fmt.Sprintf("KubeVirt's core %q binding", b)
			}
		}
	}
	return "no binding"
}

func noCloudInitVolume(vmi *model.VirtualMachineInstance) []Warning {
	if _, ok := cloudInitVolume(vmi); ok {
		return nil
	}
	return []Warning{{Code: WarnNoCloudInitVolume, Message: "the VMI has no cloudInitNoCloud or cloudInitConfigDrive volume: " +
		"the guest gets no network config for its bound interfaces, and virt-launcher v1.8 panics before it calls PreCloudInitIso " +
		"(the admission policy in manifests/ rejects such VMs)"}}
}

func macMismatches(ms []model.MACMismatch) []Warning {
	var out []Warning
	for _, m := range ms {
		out = append(out, Warning{Code: WarnMACMismatch, Interface: m.Interface, Message: fmt.Sprintf(
			"spec.domain.devices.interfaces[].macAddress %s differs from the mac in %s for this interface: the guest NIC is matched by the VMI's; "+
				"if the VF does not carry it, the guest config will not apply", m.VMI, m.ReportedBy)})
	}
	return out
}

func networkInfoMismatches(ms []model.NetworkInfoMismatch) []Warning {
	var out []Warning
	for _, m := range ms {
		out = append(out, Warning{Code: WarnNetworkInfoMismatch, Interface: m.Interface, Message: fmt.Sprintf(
			"the %s in %s differs from the %s in %s for this interface: the one in %s is used (%s is KubeVirt's copy of it, "+
				"so one of them is stale or was rewritten)", m.Field, m.Source, m.Field, downwardapi.NetworkStatusAnnotation,
			downwardapi.NetworkStatusAnnotation, m.Source)})
	}
	return out
}

func userWins(dataSource string, names []string) []Warning {
	out := make([]Warning, 0, len(names))
	for _, name := range names {
		out = append(out, Warning{Code: WarnUserNetworkDataWins, Interface: name, Message: fmt.Sprintf(
			"the VMI's %s networkData already configures this NIC (same MAC or name): the user's entry is kept and "+
				"the addresses, routes and DNS derived from the annotations are not applied", dataSource)})
	}
	return out
}

// SortWarnings orders warnings by code, then interface, and drops exact duplicates (two hooks can see
// the same case).
func SortWarnings(ws []Warning) []Warning {
	slices.SortStableFunc(ws, func(a, b Warning) int {
		return cmp.Or(strings.Compare(a.Code, b.Code), strings.Compare(a.Interface, b.Interface))
	})
	return slices.Compact(ws)
}
