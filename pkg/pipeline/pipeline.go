package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Hook names, as virt-launcher's hook manager calls them; every Error names one.
const (
	OnDefineDomain  = "OnDefineDomain"
	PreCloudInitIso = "PreCloudInitIso"
)

// Kind says why a step failed, so that an adapter can map it (pkg/hooks: to a gRPC code).
type Kind int

const (
	// InvalidInput: a payload from virt-launcher (VMI, domain XML, cloud-init data) is wrong.
	InvalidInput Kind = iota
	// FailedPrecondition: the payloads are fine but what they and the snapshot say cannot be served.
	FailedPrecondition
)

// Error is a failed step: the hook it belongs to, why, and the cause.
type Error struct {
	Hook string
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Hook + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(hook string, kind Kind, err error) error { return &Error{Hook: hook, Kind: kind, Err: err} }

// Need says what a hook still lacks in a snapshot; empty means it can run. Hooks wait until it is empty.
type Need func(*downwardapi.Snapshot) []downwardapi.Missing

// ParseDomain parses domainXML once for DomainNeed and Domain (a 4 MiB domain costs ~100 ms per parse;
// parsing it once per bound interface burned 44 s of CPU for 400, issue 15). It returns nil when nothing
// is bound: then the domain goes back untouched, unparsed. It stops when ctx ends.
func ParseDomain(ctx context.Context, vmi *model.VirtualMachineInstance, opts model.Options, domainXML []byte) (*domain.Document, error) {
	if len(model.BoundInterfaceNames(vmi, opts.BindingName)) == 0 {
		return nil, nil
	}
	doc, err := domain.Parse(ctx, domainXML)
	if err != nil {
		return nil, fail(OnDefineDomain, InvalidInput, err)
	}
	return doc, nil
}

// DomainNeed is what OnDefineDomain waits for: the VF host PCI address of every bound interface that
// KubeVirt did not wire itself (a binding registered with domainAttachmentType tap/managedTap needs no VF).
// doc is ParseDomain's.
func DomainNeed(vmi *model.VirtualMachineInstance, opts model.Options, doc *domain.Document) (Need, error) {
	names := model.BoundInterfaceNames(vmi, opts.BindingName)
	if len(names) == 0 || doc == nil {
		return func(*downwardapi.Snapshot) []downwardapi.Missing { return nil }, nil
	}
	wired := make(map[string]bool, len(names))
	for _, name := range names {
		ok, err := doc.WiredByKubeVirt(name)
		if err != nil {
			return nil, fail(OnDefineDomain, InvalidInput, err)
		}
		wired[name] = ok
	}
	skip := func(name string) bool { return wired[name] }
	return func(s *downwardapi.Snapshot) []downwardapi.Missing {
		return model.MissingForDomain(vmi, s, opts, skip)
	}, nil
}

// CloudInitNeed is what PreCloudInitIso waits for: a MAC and an L3 entry per bound interface.
func CloudInitNeed(vmi *model.VirtualMachineInstance, opts model.Options) Need {
	if len(model.BoundInterfaceNames(vmi, opts.BindingName)) == 0 {
		return func(*downwardapi.Snapshot) []downwardapi.Missing { return nil }
	}
	// Without user networkData our config replaces cloud-init's DHCP fallback, so the pod NIC is ours
	// to configure too, matched by MAC: with masquerade and bridge that is the pod interface's MAC.
	replacesFallback := !vmi.GivesNetworkData()
	return func(s *downwardapi.Snapshot) []downwardapi.Missing {
		missing := model.MissingForCloudInit(vmi, s, opts)
		if replacesFallback {
			missing = append(missing, model.MissingForPodNIC(vmi, s, opts.BindingName)...)
		}
		return missing
	}
}

// Domain is OnDefineDomain's work: one <hostdev> per bound VF spliced into domainXML (which is
// returned unchanged when nothing is bound), plus the warnings that step can see.
func Domain(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options, domainXML []byte, doc *domain.Document) ([]byte, []Warning, error) {
	if len(model.BoundInterfaceNames(vmi, opts.BindingName)) == 0 || doc == nil {
		return domainXML, nothingBound(vmi, opts), nil
	}
	ifaces, err := model.Build(vmi, snap, opts)
	if err != nil {
		return nil, nil, fail(OnDefineDomain, FailedPrecondition, err)
	}
	out, err := doc.Apply(ifaces)
	if err != nil {
		return nil, nil, fail(OnDefineDomain, FailedPrecondition, err)
	}
	out, warnings, err := podNICMAC(vmi, snap, opts, out, doc)
	if err != nil {
		return nil, nil, err
	}
	return out, append(warnings, noCloudInitVolume(vmi)...), nil
}

// podNICMAC makes the domain's pod-network NIC carry the MAC PreCloudInitIso matched it by (the pod
// interface's, masquerade and bridge without macAddress) when KubeVirt left it none; KubeVirt v1.8 sets
// it before OnDefineDomain (virtwrap/manager.go preStartHook, SetupPodNetworkPhase2), so this is a
// safety net, and an existing MAC is kept: with bridge it is what OVN's port security expects.
func podNICMAC(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options, domainXML []byte, doc *domain.Document) ([]byte, []Warning, error) {
	nic, err := model.FindPodNIC(vmi, snap, opts.BindingName)
	if err != nil || nic == nil || !nic.FromPod || nic.Interface.MAC.IsZero() {
		return domainXML, nil, nil // PreCloudInitIso reports the errors; nothing was matched by a pod MAC
	}
	// The common case, KubeVirt set a MAC, is read from the document parsed already; only an interface
	// without one costs a parse of the result.
	res, err := doc.PodNICMAC(nic.Interface.Name)
	if err != nil {
		return nil, nil, fail(OnDefineDomain, InvalidInput, fmt.Errorf("pod-network interface %q: %w", nic.Interface.Name, err))
	}
	out := domainXML
	if res.Found && res.Existing == "" {
		out, res, err = domain.SetPodNICMAC(domainXML, nic.Interface.Name, nic.Interface.MAC)
	}
	if err != nil {
		return nil, nil, fail(OnDefineDomain, InvalidInput, fmt.Errorf("pod-network interface %q: %w", nic.Interface.Name, err))
	}
	if want := nic.Interface.MAC.String(); res.Existing != "" && !strings.EqualFold(res.Existing, want) {
		return out, []Warning{{Code: WarnPodMACMismatch, Interface: nic.Interface.Name, Message: fmt.Sprintf(
			"the domain gives the pod-network NIC MAC %s, the pod interface has %s (%s): the guest's network config "+
				"matches the latter, so that NIC may stay down; set macAddress on it", res.Existing, want, nic.Interface.MACSource)}}, nil
	}
	return out, nil, nil
}

// CloudInit is PreCloudInitIso's work: the guest network config of every bound interface (and of the
// pod-network NIC, see model.FindPodNIC) merged into the CloudInitData JSON; it returns the new
// CloudInitData and the legacy CloudInitNoCloudSource JSON, plus the warnings that step can see. With
// nothing bound the data goes back as received, except that an empty UserData is filled (cloudinit.Apply).
func CloudInit(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options, cloudInitData, noCloudSource []byte) (data, source []byte, warnings []Warning, err error) {
	if len(model.BoundInterfaceNames(vmi, opts.BindingName)) == 0 {
		warnings = nothingBound(vmi, opts)
		data, source, err := cloudinit.Apply(cloudInitData, nil)
		if err != nil {
			return cloudInitData, noCloudSource, warnings, nil
		}
		// The echo is built from CloudInitData: the hook server does not keep the request's copy (pkg/hooks codec.go).
		return data, source, warnings, nil
	}
	ifaces, err := model.Build(vmi, snap, opts)
	if err != nil {
		return nil, nil, nil, fail(PreCloudInitIso, FailedPrecondition, err)
	}
	// The pod-network NIC is one step: which NIC it is, and how Apply treats it, belong to model and
	// cloudinit.
	var fallback []model.BoundInterface
	nic, err := model.FindPodNIC(vmi, snap, opts.BindingName)
	if err != nil {
		return nil, nil, nil, fail(PreCloudInitIso, InvalidInput, err)
	}
	if nic != nil {
		if !vmi.GivesNetworkData() && nic.Interface.MAC.IsZero() && nic.Unservable != "" {
			return nil, nil, nil, fail(PreCloudInitIso, FailedPrecondition, fmt.Errorf("interface %q (pod network) has no "+
				"macAddress and the VMI gives no networkData: the network config written for the SR-IOV interfaces replaces "+
				"cloud-init's DHCP fallback and must match the pod NIC by MAC, but %s; set macAddress on interface %q, or give networkData",
				nic.Interface.Name, nic.Unservable, nic.Interface.Name))
		}
		fallback = append(fallback, nic.Interface)
	}
	windowsScript, err := cloudinit.WindowsNetworkScriptRequested(vmi.Annotations)
	if err != nil {
		return nil, nil, nil, fail(PreCloudInitIso, InvalidInput, fmt.Errorf("VMI metadata.annotations: %w", err))
	}
	var userDataWarnings []Warning
	data, source, err = cloudinit.ApplyWith(cloudInitData, cloudinit.ApplyOptions{
		WindowsNetworkScript: windowsScript,
		Warn: func(code, message string) {
			userDataWarnings = append(userDataWarnings, Warning{Code: code, Message: message})
		},
	}, ifaces, fallback...)
	if err != nil {
		return nil, nil, nil, fail(PreCloudInitIso, InvalidInput, err)
	}
	warnings = append(userDataWarnings, macMismatches(vmi, snap, opts)...)
	warnings = append(warnings, networkInfoMismatches(vmi, snap, opts)...)
	if ds, user, err := cloudinit.NetworkData(cloudInitData); err == nil {
		warnings = append(warnings, userWins(ds, cloudinit.UserConfigured(ds, user, ifaces))...)
	}
	return data, source, warnings, nil
}

// Cache is what the interface cache holds for one VMI: the writer (ifacecache.Writer.Sync) takes
// these fields, and Entries gives the files it writes.
type Cache struct {
	VMIUID  string
	Spec    []model.Interface
	Bound   []model.BoundInterface
	Primary model.Family
}

// CacheFor derives the interface cache of the VMI from the snapshot.
func CacheFor(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options) (Cache, error) {
	ifaces, err := model.Build(vmi, snap, opts)
	if err != nil {
		return Cache{}, fmt.Errorf("interface cache: %w", err)
	}
	return Cache{VMIUID: vmi.UID, Spec: vmi.Spec.Domain.Devices.Interfaces, Bound: ifaces, Primary: model.PrimaryFamily(snap, opts.PodIP)}, nil
}

// Entries returns the cache files, as the writer names and encodes them.
func (c Cache) Entries() ([]ifacecache.Entry, error) {
	return ifacecache.BuildEntries(c.Spec, c.Bound, c.Primary)
}
