package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Snapshots is what the binding needs of the DownwardAPI watcher.
type Snapshots interface {
	Snapshot() *downwardapi.Snapshot
	Wait(ctx context.Context, need func(*downwardapi.Snapshot) []downwardapi.Missing) (*downwardapi.Snapshot, error)
	Next(ctx context.Context, after uint64) (*downwardapi.Snapshot, error)
}

// CacheWriter is what the binding needs of the interface cache writer.
type CacheWriter interface {
	Sync(vmiUID string, specIfaces []model.Interface, bound []model.BoundInterface, primary model.Family) (ifacecache.SyncResult, error)
}

// BindingConfig configures a Binding.
type BindingConfig struct {
	Options     model.Options
	WaitTimeout time.Duration
	Snapshots   Snapshots
	Cache       CacheWriter // nil: no interface cache is written
	Logger      *slog.Logger
}

// Binding is the Handler that does the sidecar's work for interfaces bound to our binding:
// the VF hostdev in OnDefineDomain, the guest network config in PreCloudInitIso, and the
// interface cache after either. Interfaces not bound to us are never touched.
type Binding struct {
	cfg BindingConfig
	log *slog.Logger

	mu  sync.Mutex
	vmi *model.VirtualMachineInstance // the latest VMI a hook call carried, for the cache refresher
	// kick wakes the refresher after a hook call; buffered so a hook never blocks on it.
	kick chan struct{}

	// synced is what the refresher last wrote the cache for, successfully; only it reads and writes
	// this. A refresh for the same VMI and snapshot generation would rewrite nothing.
	synced struct {
		vmi        *model.VirtualMachineInstance
		generation uint64
	}
}

// NewBinding checks cfg and returns a Binding.
func NewBinding(cfg BindingConfig) (*Binding, error) {
	if cfg.Snapshots == nil {
		return nil, errors.New("hooks: binding needs a snapshot source")
	}
	if cfg.Options.BindingName == "" {
		return nil, errors.New("hooks: binding needs a binding name")
	}
	if cfg.WaitTimeout <= 0 {
		return nil, fmt.Errorf("hooks: wait timeout %s must be positive", cfg.WaitTimeout)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Binding{cfg: cfg, log: logger, kick: make(chan struct{}, 1)}, nil
}

// OnDefineDomain adds one <hostdev> per bound VF, waiting for device-info if it is not there yet.
// It is idempotent: virt-launcher calls it several times per start (virtwrap/manager.go
// allocateHotplugPorts), and on a migration target discards the result.
func (b *Binding) OnDefineDomain(ctx context.Context, vmiJSON, domainXML []byte) ([]byte, error) {
	vmi, err := decodeVMI(vmiJSON)
	if err != nil {
		return nil, err
	}
	names := model.BoundInterfaceNames(vmi, b.cfg.Options.BindingName)
	if len(names) == 0 {
		return domainXML, nil
	}
	// Parsed once for every question and the Apply (a 4 MiB domain costs ~100 ms per parse).
	doc, err := domain.Parse(ctx, domainXML)
	if ended := contextEnded(ctx, "OnDefineDomain"); ended != nil {
		return nil, ended
	}
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "OnDefineDomain: %v", err)
	}
	// Interfaces KubeVirt wired itself (binding registered with domainAttachmentType tap/managedTap)
	// need no VF and so no device-info.
	wired := make(map[string]bool, len(names))
	for _, name := range names {
		ok, err := doc.WiredByKubeVirt(name)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "OnDefineDomain: %v", err)
		}
		wired[name] = ok
	}
	skip := func(name string) bool { return wired[name] }
	snap, err := b.wait(ctx, "OnDefineDomain", func(s *downwardapi.Snapshot) []downwardapi.Missing {
		return model.MissingForDomain(vmi, s, b.cfg.Options, skip)
	})
	if err != nil {
		return nil, err
	}
	ifaces, err := model.Build(vmi, snap, b.cfg.Options)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "OnDefineDomain: %v", err)
	}
	out, err := doc.Apply(ifaces)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "OnDefineDomain: %v", err)
	}
	b.remember(vmi)
	return out, nil
}

// PreCloudInitIso merges the guest network config of every bound interface into the user's
// cloud-init, waiting for the annotations it needs.
func (b *Binding) PreCloudInitIso(ctx context.Context, vmiJSON, cloudInitData, noCloudSource []byte) ([]byte, []byte, error) {
	vmi, err := decodeVMI(vmiJSON)
	if err != nil {
		return nil, nil, err
	}
	if len(model.BoundInterfaceNames(vmi, b.cfg.Options.BindingName)) == 0 {
		// Nothing of ours: hand the data back as received. The one exception is an empty UserData,
		// which KubeVirt would reject and replace with the legacy source, dropping the metadata
		// (pkg/hooks/manager.go preCloudInitIsoValidateResult); Apply makes it "#cloud-config".
		data, source, err := cloudinit.Apply(cloudInitData, nil)
		if err != nil || bytes.Equal(data, cloudInitData) {
			return cloudInitData, noCloudSource, nil
		}
		return data, source, nil
	}
	snap, err := b.wait(ctx, "PreCloudInitIso", func(s *downwardapi.Snapshot) []downwardapi.Missing {
		return model.MissingForCloudInit(vmi, s, b.cfg.Options)
	})
	if err != nil {
		return nil, nil, err
	}
	ifaces, err := model.Build(vmi, snap, b.cfg.Options)
	if err != nil {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "PreCloudInitIso: %v", err)
	}
	var fallback []model.BoundInterface
	fb, err := model.FallbackInterface(vmi, b.cfg.Options.BindingName)
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "PreCloudInitIso: %v", err)
	}
	if fb != nil {
		fallback = append(fallback, *fb)
	}
	if ended := contextEnded(ctx, "PreCloudInitIso"); ended != nil {
		return nil, nil, ended
	}
	data, source, err := cloudinit.Apply(cloudInitData, ifaces, fallback...)
	if ended := contextEnded(ctx, "PreCloudInitIso"); ended != nil {
		return nil, nil, ended // nobody waits for the result (the merge itself is bounded: cloudinit limits)
	}
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "PreCloudInitIso: %v", err)
	}
	b.remember(vmi)
	return data, source, nil
}

// wait blocks until need reports nothing missing, up to the configured timeout. A malformed
// source fails at once (model.Build reports snapshot problems) instead of waiting it out.
func (b *Binding) wait(ctx context.Context, hook string, need func(*downwardapi.Snapshot) []downwardapi.Missing) (*downwardapi.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	// The common case: everything is there. Checked once here, not again inside Wait.
	current := b.cfg.Snapshots.Snapshot()
	missing := need(current)
	if len(missing) == 0 {
		return current, nil
	}
	// Names only (interface, network, source, field): never annotation values.
	items := make([]string, 0, len(missing))
	for _, m := range missing {
		items = append(items, m.String())
	}
	b.log.Info("waiting for data", "hook", hook, "timeout", b.cfg.WaitTimeout, "missing", items)
	snap, err := b.cfg.Snapshots.Wait(ctx, need)
	if err != nil {
		var missing *downwardapi.MissingError
		if errors.As(err, &missing) {
			b.log.Warn("data still missing", "hook", hook, "waited", time.Since(start), "missing", len(missing.Items))
		}
		code := codes.DeadlineExceeded
		if errors.Is(err, context.Canceled) {
			code = codes.Canceled
		}
		return nil, status.Errorf(code, "%s: waited %s for DownwardAPI data: %v", hook, time.Since(start).Round(time.Millisecond), err)
	}
	if waited := time.Since(start); waited > time.Millisecond {
		b.log.Info("data arrived", "hook", hook, "waited", waited, "generation", snap.Generation)
	}
	return snap, nil
}

func decodeVMI(vmiJSON []byte) (*model.VirtualMachineInstance, error) {
	vmi, err := model.DecodeVMI(vmiJSON)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "VMI from virt-launcher: %v", err)
	}
	return vmi, nil
}

// remember records the VMI for the cache refresher and wakes it. The cache is written there, off
// the hook's path: its fsyncs cost milliseconds that virt-launcher should not wait for.
func (b *Binding) remember(vmi *model.VirtualMachineInstance) {
	b.mu.Lock()
	// virt-launcher calls OnDefineDomain several times with the same VMI: keeping the pointer lets
	// the refresher see that it wrote the cache for this one already (refreshOnce).
	if b.vmi == nil || !reflect.DeepEqual(b.vmi, vmi) {
		b.vmi = vmi
	}
	b.mu.Unlock()
	wake(b.kick)
}

// wake sends on a one-slot channel without blocking; a pending wake-up already covers this one.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (b *Binding) current() *model.VirtualMachineInstance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.vmi
}

// syncCache writes the interface cache for what is known now and says whether all of it was written.
// Failures are logged, never passed to a hook: the cache feeds vmi.status, and must never fail a VM
// start.
func (b *Binding) syncCache(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, ifaces []model.BoundInterface) (ok bool) {
	if b.cfg.Cache == nil {
		return true
	}
	primary := model.PrimaryFamily(snap, b.cfg.Options.PodIP)
	res, err := b.cfg.Cache.Sync(vmi.UID, vmi.Spec.Domain.Devices.Interfaces, ifaces, primary)
	if err != nil {
		b.log.Warn("interface cache not fully written", "vmi", vmi.UID, "error", err.Error())
	}
	if len(res.Written)+len(res.Removed) > 0 {
		b.log.Info("interface cache updated", "vmi", vmi.UID, "written", res.Written, "removed", res.Removed)
	}
	return err == nil
}

// RefreshCache writes the interface cache whenever a hook call brings the VMI or the annotations
// change (IP changes), until ctx ends. It is the only writer of the cache. It knows the VMI only
// from hook calls: an interface hot-plugged without a new hook call is not seen (nor wired: the
// hostdev too comes from OnDefineDomain). A panic in one refresh is logged, not fatal.
func (b *Binding) RefreshCache(ctx context.Context) {
	if b.cfg.Cache == nil {
		return
	}
	changed := make(chan struct{}, 1)
	go func() {
		var gen uint64
		for {
			snap, err := b.cfg.Snapshots.Next(ctx, gen)
			if err != nil {
				return // ctx done or watcher closed
			}
			gen = snap.Generation
			wake(changed)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-changed:
		}
		b.refreshOnce()
	}
}

func (b *Binding) refreshOnce() {
	// The pod has restartPolicy Never: nothing in this goroutine may take the sidecar down.
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("panic while refreshing the interface cache", "panic", fmt.Sprint(r))
		}
	}()
	vmi := b.current()
	if vmi == nil {
		return // no hook call yet: the VMI is unknown
	}
	snap := b.cfg.Snapshots.Snapshot()
	if vmi == b.synced.vmi && snap.Generation == b.synced.generation {
		// Written for this VMI and these annotations already. (A cache file removed by hand comes
		// back only when either changes: nothing but this refresher writes there.)
		return
	}
	ifaces, err := model.Build(vmi, snap, b.cfg.Options)
	if err != nil {
		b.log.Warn("interface cache not refreshed", "generation", snap.Generation, "error", err.Error())
		return
	}
	if b.syncCache(vmi, snap, ifaces) {
		b.synced.vmi, b.synced.generation = vmi, snap.Generation
	}
}
