package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
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

func needNothing(*downwardapi.Snapshot) []downwardapi.Missing { return nil }

// Wait is how a hook waits for data: it returns the first snapshot for which need reports nothing, or
// an error naming what is still missing (pkg/binding waits on the DownwardAPI watcher).
type Wait func(ctx context.Context, hook string, need Need) (*downwardapi.Snapshot, error)

// steps are the three derivations a call makes at most once per snapshot or payload; tests count them.
type steps struct {
	derive func(*model.VirtualMachineInstance, *downwardapi.Snapshot, model.Options) *model.Derivation
	plan   func(*cloudinit.Input, []model.BoundInterface) (*cloudinit.Plans, error)
	parse  func(*cloudinit.Input) (*cloudinit.UserNetwork, error)
}

// Call is the pipeline for one hook call (or one render): built from the VMI, it derives the bound
// interfaces once, the model and the pod NIC once per snapshot, and, for PreCloudInitIso, the NIC plans
// and the user's parsed networkData once; each hook's method then runs that hook's steps in order. Not
// safe for concurrent use: one call, one goroutine.
type Call struct {
	vmi   *model.VirtualMachineInstance
	opts  model.Options
	bound []string
	steps steps

	// The derivation for snap, made on first use (derive), and model.FindPodNIC for it, run once on
	// first use (findPodNIC).
	snap    *downwardapi.Snapshot
	derived *model.Derivation
	podNIC  func() (*model.PodNIC, error)
}

// NewCall starts the pipeline of one call for vmi.
func NewCall(vmi *model.VirtualMachineInstance, opts model.Options) *Call {
	return &Call{vmi: vmi, opts: opts, bound: model.BoundInterfaceNames(vmi, opts.BindingName),
		steps: steps{derive: model.Derive, plan: (*cloudinit.Input).Plan, parse: (*cloudinit.Input).ParseNetworkData}}
}

// Bound reports whether any interface of the VMI is bound to the binding.
func (c *Call) Bound() bool { return len(c.bound) > 0 }

// VMI is the call's VMI.
func (c *Call) VMI() *model.VirtualMachineInstance { return c.vmi }

// derive is the model of the VMI for snap, derived once per snapshot.
func (c *Call) derive(snap *downwardapi.Snapshot) *model.Derivation {
	if c.derived == nil || c.snap != snap {
		c.snap, c.derived = snap, c.steps.derive(c.vmi, snap, c.opts)
		c.podNIC = sync.OnceValues(func() (*model.PodNIC, error) { return model.FindPodNIC(c.vmi, snap, c.opts.BindingName) })
	}
	return c.derived
}

// findPodNIC is model.FindPodNIC for snap, once per snapshot.
func (c *Call) findPodNIC(snap *downwardapi.Snapshot) (*model.PodNIC, error) {
	c.derive(snap)
	return c.podNIC()
}

// ctxEnded is the hook's error when ctx has ended: work nobody waits for stops between steps (the
// steps themselves are bounded: cloudinit and domain limits).
func ctxEnded(ctx context.Context, hook string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", hook, err)
	}
	return nil
}

// OnDefineDomain is that hook's work: parse the domain once, wait for the VF PCI addresses it needs,
// then splice one <hostdev> per bound VF into domainXML (returned unchanged when nothing is bound),
// plus the warnings that step can see.
func (c *Call) OnDefineDomain(ctx context.Context, domainXML []byte, wait Wait) ([]byte, []Warning, error) {
	doc, err := c.parseDomain(ctx, domainXML)
	if ended := ctxEnded(ctx, OnDefineDomain); ended != nil {
		return nil, nil, ended
	}
	if err != nil {
		return nil, nil, err
	}
	need, err := c.domainNeed(doc)
	if err != nil {
		return nil, nil, err
	}
	snap, err := wait(ctx, OnDefineDomain, need)
	if err != nil {
		return nil, nil, err
	}
	out, warnings, err := c.domain(snap, domainXML, doc)
	if ended := ctxEnded(ctx, OnDefineDomain); ended != nil {
		return nil, nil, ended // nobody waits for the result
	}
	return out, warnings, err
}

// PreCloudInitIso is that hook's work: wait for a MAC and an L3 entry per bound interface, then merge
// their guest network config into the CloudInitData JSON; it returns the new CloudInitData
// (cloudinit.Result) and the warnings that step can see.
func (c *Call) PreCloudInitIso(ctx context.Context, cloudInitData []byte, wait Wait) (data []byte, warnings []Warning, err error) {
	snap, err := wait(ctx, PreCloudInitIso, c.cloudInitNeed())
	if err != nil {
		return nil, nil, err
	}
	if ended := ctxEnded(ctx, PreCloudInitIso); ended != nil {
		return nil, nil, ended
	}
	res, warnings, err := c.cloudInit(snap, cloudInitData)
	if ended := ctxEnded(ctx, PreCloudInitIso); ended != nil {
		return nil, nil, ended // nobody waits for the result (the merge itself is bounded: cloudinit limits)
	}
	if err != nil {
		return nil, nil, err
	}
	return res.Data, warnings, nil
}

// parseDomain parses domainXML once for domainNeed and domain: one parse per bound interface costs
// seconds of CPU for a large domain with hundreds of them (docs/footprint.md "Figures behind the code"). It returns nil when nothing is bound: then the domain goes back untouched, unparsed. It stops when ctx ends.
func (c *Call) parseDomain(ctx context.Context, domainXML []byte) (*domain.Document, error) {
	if !c.Bound() {
		return nil, nil
	}
	doc, err := domain.Parse(ctx, domainXML)
	if err != nil {
		return nil, fail(OnDefineDomain, InvalidInput, err)
	}
	return doc, nil
}

// domainNeed is what OnDefineDomain waits for: the VF host PCI address of every bound interface that
// KubeVirt did not wire itself (a binding registered with domainAttachmentType tap/managedTap needs no VF).
func (c *Call) domainNeed(doc *domain.Document) (Need, error) {
	if !c.Bound() || doc == nil {
		return needNothing, nil
	}
	wired := make(map[string]bool, len(c.bound))
	for _, name := range c.bound {
		ok, err := doc.WiredByKubeVirt(name)
		if err != nil {
			return nil, fail(OnDefineDomain, InvalidInput, err)
		}
		wired[name] = ok
	}
	skip := func(name string) bool { return wired[name] }
	return func(s *downwardapi.Snapshot) []downwardapi.Missing {
		return c.derive(s).MissingForDomain(skip)
	}, nil
}

// cloudInitNeed is what PreCloudInitIso waits for: a MAC and an L3 entry per bound interface.
func (c *Call) cloudInitNeed() Need {
	if !c.Bound() {
		return needNothing
	}
	// Without user networkData our config replaces cloud-init's DHCP fallback, so the pod NIC is ours
	// to configure too, matched by MAC: with masquerade and bridge that is the pod interface's MAC.
	replacesFallback := !c.vmi.GivesNetworkData()
	return func(s *downwardapi.Snapshot) []downwardapi.Missing {
		missing := c.derive(s).MissingForCloudInit()
		if replacesFallback {
			missing = append(missing, model.MissingForPodNIC(c.vmi, s, c.opts.BindingName)...)
		}
		return missing
	}
}

// domain is OnDefineDomain's work once the data is there. doc is parseDomain's.
func (c *Call) domain(snap *downwardapi.Snapshot, domainXML []byte, doc *domain.Document) ([]byte, []Warning, error) {
	if !c.Bound() || doc == nil {
		return domainXML, nothingBound(c.vmi, c.opts), nil
	}
	ifaces, err := c.derive(snap).Interfaces()
	if err != nil {
		return nil, nil, fail(OnDefineDomain, FailedPrecondition, err)
	}
	out, err := doc.Apply(ifaces)
	if err != nil {
		return nil, nil, fail(OnDefineDomain, FailedPrecondition, err)
	}
	out, warnings, err := c.podNICMAC(snap, out, doc)
	if err != nil {
		return nil, nil, err
	}
	return out, append(warnings, noCloudInitVolume(c.vmi)...), nil
}

// podNICMAC makes the domain's pod-network NIC carry the MAC PreCloudInitIso matched it by (the pod
// interface's, masquerade and bridge without macAddress) when KubeVirt left it none; KubeVirt v1.8 sets
// it before OnDefineDomain (virtwrap/manager.go preStartHook, SetupPodNetworkPhase2), so this is a
// safety net, and an existing MAC is kept: with bridge it is what OVN's port security expects.
func (c *Call) podNICMAC(snap *downwardapi.Snapshot, domainXML []byte, doc *domain.Document) ([]byte, []Warning, error) {
	nic, err := c.findPodNIC(snap)
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

// cloudInit is PreCloudInitIso's work once the data is there: the guest network config of every bound
// interface (and of the pod-network NIC, see model.FindPodNIC) merged into the CloudInitData JSON. With
// nothing bound the data goes back as received, except that an empty UserData is filled
// (cloudinit.Input.PassThrough): virt-launcher takes the answer's CloudInitData only when it has UserData
// and metadata (manager.go preCloudInitIsoValidateResult). CloudInitData that does not decode goes back as
// it came.
func (c *Call) cloudInit(snap *downwardapi.Snapshot, cloudInitData []byte) (*cloudinit.Result, []Warning, error) {
	if !c.Bound() {
		warnings := nothingBound(c.vmi, c.opts)
		res := &cloudinit.Result{Data: cloudInitData}
		if in, err := cloudinit.DecodeInput(cloudInitData); err == nil {
			res.NetworkData = []byte(in.UserNetworkData())
			if data, err := in.PassThrough(); err == nil {
				res.Data = data
			}
		}
		return res, warnings, nil
	}
	derived := c.derive(snap)
	ifaces, err := derived.Interfaces()
	if err != nil {
		return nil, nil, fail(PreCloudInitIso, FailedPrecondition, err)
	}
	// The pod-network NIC is one step: which NIC it is, and how the merge treats it, belong to model and
	// cloudinit.
	var podNIC []model.BoundInterface
	nic, err := c.findPodNIC(snap)
	if err != nil {
		return nil, nil, fail(PreCloudInitIso, InvalidInput, err)
	}
	if nic != nil {
		if !c.vmi.GivesNetworkData() && nic.Interface.MAC.IsZero() && nic.Unservable != "" {
			return nil, nil, fail(PreCloudInitIso, FailedPrecondition, fmt.Errorf("interface %q (pod network) has no "+
				"macAddress and the VMI gives no networkData: the network config written for the SR-IOV interfaces "+
				"replaces cloud-init's DHCP fallback and must match the pod NIC by MAC, but %s; set macAddress on interface %q, or give networkData",
				nic.Interface.Name, nic.Unservable, nic.Interface.Name))
		}
		podNIC = append(podNIC, nic.Interface)
	}
	windowsScript, err := cloudinit.WindowsNetworkScriptRequested(c.vmi.Annotations)
	if err != nil {
		return nil, nil, fail(PreCloudInitIso, InvalidInput, fmt.Errorf("VMI metadata.annotations: %w", err))
	}
	var userDataWarnings []Warning
	res, err := c.merge(cloudInitData, cloudinit.ApplyOptions{
		WindowsNetworkScript: windowsScript,
		Warn: func(code, message string) {
			userDataWarnings = append(userDataWarnings, Warning{Code: code, Message: message})
		},
	}, ifaces, podNIC)
	if err != nil {
		return nil, nil, fail(PreCloudInitIso, InvalidInput, err)
	}
	warnings := append(userDataWarnings, macMismatches(derived.MACMismatches())...)
	warnings = append(warnings, networkInfoMismatches(derived.NetworkInfoMismatches())...)
	warnings = append(warnings, userWins(res.DataSource, res.UserConfigured)...)
	return res, warnings, nil
}

// merge runs cloudinit's steps in order, each once: decode the CloudInitData, add the pod NIC, plan the
// NICs, parse the user's networkData, merge.
func (c *Call) merge(cloudInitData []byte, opts cloudinit.ApplyOptions, ifaces, podNIC []model.BoundInterface) (*cloudinit.Result, error) {
	in, err := cloudinit.DecodeInput(cloudInitData)
	if err != nil {
		return nil, err
	}
	if ifaces, err = cloudinit.WithPodNIC(ifaces, in.UserNetworkData(), podNIC...); err != nil {
		return nil, err
	}
	plans, err := c.steps.plan(in, ifaces)
	if err != nil {
		return nil, err
	}
	user, err := c.steps.parse(in)
	if err != nil {
		return nil, err
	}
	return in.Merge(opts, plans, user)
}

// Cache is what the interface cache holds for one VMI: the writer (ifacecache.Writer.Sync) takes
// these fields, and ifacecache.BuildEntries gives the files it writes.
type Cache struct {
	VMIUID  string
	Spec    []model.Interface
	Bound   []model.BoundInterface
	Primary model.Family
}

// Cache derives the interface cache of the VMI from the snapshot.
func (c *Call) Cache(snap *downwardapi.Snapshot) (Cache, error) {
	ifaces, err := c.derive(snap).Interfaces()
	if err != nil {
		return Cache{}, fmt.Errorf("interface cache: %w", err)
	}
	return Cache{VMIUID: c.vmi.UID, Spec: c.vmi.Spec.Domain.Devices.Interfaces, Bound: ifaces, Primary: model.PrimaryFamily(snap, c.opts.PodIP)}, nil
}
