package binding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
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

// Config configures a Binding.
type Config struct {
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
	cfg Config
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

// New checks cfg and returns a Binding.
func New(cfg Config) (*Binding, error) {
	if cfg.Snapshots == nil {
		return nil, errors.New("binding: needs a snapshot source")
	}
	if cfg.Options.BindingName == "" {
		return nil, errors.New("binding: needs a binding name")
	}
	if cfg.WaitTimeout <= 0 {
		return nil, fmt.Errorf("binding: wait timeout %s must be positive", cfg.WaitTimeout)
	}
	return &Binding{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), kick: make(chan struct{}, 1)}, nil
}

// OnDefineDomain adds one <hostdev> per bound VF, waiting for device-info if it is not there yet.
// It is idempotent: virt-launcher calls it several times per start (virtwrap/manager.go
// allocateHotplugPorts), and on a migration target discards the result; there it refuses the
// migration of a VMI with bound interfaces unless the VMI opts in (checkMigrationTarget). The work is
// pipeline.Call.OnDefineDomain's; `render` runs the same steps.
func (b *Binding) OnDefineDomain(ctx context.Context, vmiJSON, domainXML []byte) ([]byte, error) {
	call, err := b.newCall(vmiJSON)
	if err != nil {
		return nil, err
	}
	// On a migration target, before any wait: failing here fails KubeVirt's target preparation, so
	// the source never detaches our VFs (checkMigrationTarget).
	vmi := call.VMI()
	if err := checkMigrationTarget(vmi, b.cfg.Options.BindingName); err != nil {
		b.log.Warn("live migration refused", "hook", pipeline.OnDefineDomain, "vmi", vmi.Namespace+"/"+vmi.Name,
			"targetPod", vmi.Status.MigrationState.TargetPod)
		return nil, statusError(&pipeline.Error{Hook: pipeline.OnDefineDomain, Kind: pipeline.FailedPrecondition, Err: err})
	}
	out, warnings, err := call.OnDefineDomain(ctx, domainXML, b.wait)
	if err != nil {
		return nil, statusError(err)
	}
	b.done(pipeline.OnDefineDomain, call, warnings)
	return out, nil
}

// PreCloudInitIso merges the guest network config of every bound interface into the user's
// cloud-init, waiting for the annotations it needs. The work is pipeline.Call.PreCloudInitIso's;
// `render` runs the same steps.
func (b *Binding) PreCloudInitIso(ctx context.Context, vmiJSON, cloudInitData []byte) ([]byte, error) {
	call, err := b.newCall(vmiJSON)
	if err != nil {
		return nil, err
	}
	data, warnings, err := call.PreCloudInitIso(ctx, cloudInitData, b.wait)
	if err != nil {
		return nil, statusError(err)
	}
	b.done(pipeline.PreCloudInitIso, call, warnings)
	return data, nil
}

func (b *Binding) newCall(vmiJSON []byte) (*pipeline.Call, error) {
	vmi, err := model.DecodeVMI(vmiJSON)
	if err != nil {
		return nil, statusError(&vmiError{err})
	}
	return pipeline.NewCall(vmi, b.cfg.Options), nil
}

// done logs each warning of a successful hook call as one WARN line with fields (names only, never
// annotation values), and hands a VMI with bound interfaces to the cache refresher, which writes the
// cache off the hook's path: its fsyncs cost milliseconds that virt-launcher should not wait for.
func (b *Binding) done(hook string, call *pipeline.Call, warnings []pipeline.Warning) {
	vmi := call.VMI()
	for _, w := range warnings {
		b.log.Warn("check the VMI", "hook", hook, "vmi", vmi.Namespace+"/"+vmi.Name, "code", w.Code, "interface", w.Interface, "detail", w.Message)
	}
	if !call.Bound() {
		return
	}
	b.mu.Lock()
	// virt-launcher calls OnDefineDomain several times with the same VMI: keeping the pointer lets
	// the refresher see that it wrote the cache for this one already (refreshOnce).
	if b.vmi == nil || !reflect.DeepEqual(b.vmi, vmi) {
		b.vmi = vmi
	}
	b.mu.Unlock()
	wake(b.kick)
}

// wait blocks until need reports nothing missing, up to the configured timeout. A malformed
// source fails at once (model.Build reports snapshot problems) instead of waiting it out.
func (b *Binding) wait(ctx context.Context, hook string, need pipeline.Need) (*downwardapi.Snapshot, error) {
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
	b.log.Info("waiting for data", "hook", hook, "timeout", b.cfg.WaitTimeout, "missingCount", len(items), "missing", items)
	snap, err := b.cfg.Snapshots.Wait(ctx, need)
	if err != nil {
		var missing *downwardapi.MissingError
		if errors.As(err, &missing) {
			b.log.Warn("data still missing", "hook", hook, "waited", time.Since(start), "missing", len(missing.Items))
		}
		return nil, fmt.Errorf("%s: waited %s for DownwardAPI data: %w%s", hook, time.Since(start).Round(time.Millisecond), err,
			podInfoHint(b.cfg.Snapshots.Snapshot()))
	}
	if waited := time.Since(start); waited > time.Millisecond {
		b.log.Info("data arrived", "hook", hook, "waited", waited, "generation", snap.Generation)
	}
	return snap, nil
}

// wake sends on a one-slot channel without blocking; a pending wake-up already covers this one.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// syncCache writes the interface cache (RefreshCache runs only with one) for what is known now and
// says whether all of it was written. Failures are logged, never passed to a hook: the cache feeds
// vmi.status, and must never fail a VM start.
func (b *Binding) syncCache(c pipeline.Cache, generation uint64) (ok bool) {
	res, err := b.cfg.Cache.Sync(c.VMIUID, c.Spec, c.Bound, c.Primary)
	if err != nil {
		b.log.Warn("interface cache not fully written", "vmiUID", c.VMIUID, "generation", generation, "error", err)
	}
	if len(res.Written)+len(res.Removed) > 0 {
		b.log.Info("interface cache updated", "vmiUID", c.VMIUID, "generation", generation,
			"writtenCount", len(res.Written), "written", res.Written,
			"removedCount", len(res.Removed), "removed", res.Removed)
	} else if err == nil {
		b.log.Debug("interface cache checked", "vmiUID", c.VMIUID, "generation", generation, "unchanged", len(res.Unchanged))
	}
	return err == nil
}

// Retry delays after a failed cache write (ENOSPC, a read-only or blocked directory): doubled per
// failure up to the maximum, reset by a success. Only a failure arms a timer, so an idle sidecar
// uses no CPU.
const (
	cacheRetryFirst = time.Second
	cacheRetryMax   = time.Minute
)

// RefreshCache writes the interface cache whenever a hook call brings the VMI or the annotations
// change (IP changes), and retries a failed write with backoff, until ctx ends. It is the only writer
// of the cache. It knows the VMI only from hook calls: an interface hot-plugged without a new hook
// call is not seen (nor wired: the hostdev too comes from OnDefineDomain). A panic in one refresh is
// logged, not fatal.
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
	var (
		retry   <-chan time.Time // nil while nothing failed
		backoff time.Duration
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-changed:
		case <-retry:
		}
		if b.refreshOnce() {
			backoff, retry = 0, nil
			continue
		}
		backoff = min(max(2*backoff, cacheRetryFirst), cacheRetryMax)
		retry = time.After(backoff)
		b.log.Info("interface cache write retry scheduled", "in", backoff)
	}
}

// refreshOnce syncs the cache for the latest VMI and snapshot; it reports false when a write failed
// and should be retried.
func (b *Binding) refreshOnce() (ok bool) {
	// The pod has restartPolicy Never: nothing in this goroutine may take the sidecar down.
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("panic while refreshing the interface cache", "panic", fmt.Sprint(r))
			ok = true // a retry would panic again; the next hook call or data change tries anew
		}
	}()
	b.mu.Lock()
	vmi := b.vmi
	b.mu.Unlock()
	if vmi == nil {
		return true // no hook call yet: the VMI is unknown
	}
	snap := b.cfg.Snapshots.Snapshot()
	if vmi == b.synced.vmi && snap.Generation == b.synced.generation {
		// Written for this VMI and these annotations already. (A cache file removed by hand comes
		// back only when either changes: nothing but this refresher writes there.)
		return true
	}
	cache, err := pipeline.NewCall(vmi, b.cfg.Options).Cache(snap)
	if err != nil {
		// Bad or missing data: the entries written from earlier data stay (no flap originates here),
		// and the next data change tries again; retrying the same data would fail the same way.
		b.log.Warn("interface cache not refreshed", "generation", snap.Generation, "error", err)
		return true
	}
	if !b.syncCache(cache, snap.Generation) {
		return false
	}
	b.synced.vmi, b.synced.generation = vmi, snap.Generation
	return true
}

// Sources are the DownwardAPI files the binding reads: the device-info file and the pod-info directory
// (either may be empty: not mounted).
type Sources struct {
	DeviceInfoFile string
	PodInfoDir     string
}

// Watch reads sources once and then watches them (downwardapi.Watcher: fsnotify on the directories,
// kubelet's AtomicWriter swaps); the caller closes it. kubelet mounts a pod's volumes before its containers
// start, so a pod-info volume absent at start stays absent: that is logged at once, naming the prerequisite
// (at INFO: the hook that then fails says it again, in the error virt-launcher reports).
func Watch(src Sources, logger *slog.Logger) (*downwardapi.Watcher, error) {
	w, err := downwardapi.NewWatcher(downwardapi.Config{DeviceInfoFile: src.DeviceInfoFile, PodInfoDir: src.PodInfoDir, Logger: logger})
	if err == nil && logger != nil && !w.Snapshot().PodInfo {
		logger.Info("pod-info volume absent", "dir", src.PodInfoDir, "cause", podInfoAbsent)
	}
	return w, err
}

// podInfoAbsent names the prerequisite behind a pod-info volume the container does not have: without it the
// sidecar sees neither Multus' nor OVN-Kubernetes' annotations, so PreCloudInitIso can never have what it
// needs (docs/troubleshooting.md, docs/install.md check 1).
const podInfoAbsent = "the pod-info volume (the pod's labels and annotations) is not mounted in this container: " +
	"the MutatingAdmissionPolicy sriov-udn-binding-podinfo.kubevirt.io did not mutate this pod (is it installed, " +
	"and does kube-apiserver serve MutatingAdmissionPolicy?), and the binding is not registered with downwardAPI: pod-info"

// podInfoHint is what a failed wait adds to its error when the pod-info volume is absent.
func podInfoHint(snap *downwardapi.Snapshot) string {
	if snap == nil || snap.PodInfo {
		return ""
	}
	return "; " + podInfoAbsent
}

// ReadOnce reads sources once (render's --pod-info-dir): the watcher's first synchronous read.
func ReadOnce(src Sources) (*downwardapi.Snapshot, error) {
	w, err := Watch(src, nil)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return w.Snapshot(), nil
}

// CacheDir is the interface cache writer rooted at dir (KubeVirt's layout <dir>/<vmi-uid>/<iface>).
func CacheDir(dir string, logger *slog.Logger) CacheWriter {
	return ifacecache.NewWriter(dir, logger)
}

// vmiError is a VMI payload from virt-launcher that does not decode.
type vmiError struct{ err error }

func (e *vmiError) Error() string { return "VMI from virt-launcher: " + e.err.Error() }
func (e *vmiError) Unwrap() error { return e.err }

// statusError is the gRPC status virt-launcher gets (and logs) for a failed hook: the code from codeOf,
// the error's own message (the pipeline's, which `render` prints too). Every hook returns its failures
// through it.
func statusError(err error) error {
	return status.Error(codeOf(err), err.Error())
}

// codeOf is the one map from error kinds to gRPC codes:
//   - a pipeline.Error: InvalidArgument for a wrong payload (VMI, domain XML, cloud-init data), else
//     FailedPrecondition (the payloads are fine, what they and the annotations say cannot be served);
//   - a VMI that does not decode: InvalidArgument;
//   - data still missing when the wait ends (downwardapi.MissingError): Canceled when the caller went
//     away, else DeadlineExceeded (the wait timeout, or the watcher closed under it);
//   - a context that ended: Canceled or DeadlineExceeded, as status.FromContextError says;
//   - anything else (a bug): Internal.
func codeOf(err error) codes.Code {
	var (
		pe      *pipeline.Error
		bad     *vmiError
		missing *downwardapi.MissingError
	)
	switch {
	case errors.As(err, &pe):
		if pe.Kind == pipeline.InvalidInput {
			return codes.InvalidArgument
		}
		return codes.FailedPrecondition
	case errors.As(err, &bad):
		return codes.InvalidArgument
	case errors.As(err, &missing):
		if errors.Is(err, context.Canceled) {
			return codes.Canceled
		}
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Code()
	}
	return codes.Internal
}
