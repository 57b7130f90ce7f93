// Command sidecarbench measures the sriov-udn-binding sidecar beside KubeVirt's passt binding
// sidecar in the same run (make bench): binary size, start to socket ready, idle RSS, idle CPU and
// context switches, hook latency through KubeVirt's hook Manager, kubelet swap -> waiting hook, and
// render time. It prints a table and writes JSON; it fails only when it cannot measure, never on a
// figure. Needs root: KubeVirt's hook Manager and the passt sidecar are fixed to /var/run/kubevirt-hooks.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"kubevirt.io/client-go/log"
	"kubevirt.io/kubevirt/pkg/hooks"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/hostile"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

const (
	peerPackage   = "kubevirt.io/kubevirt/cmd/sidecars/network-passt-binding"
	peerSocket    = "passt.sock" // fixed in the peer's main.go, directly under hooks.HookSocketsSharedDirectory
	sidecarSubdir = "hook-sidecar-bench"
	settle        = time.Second
	stopTimeout   = 10 * time.Second
)

type options struct {
	ours, peer, floor, binDir string
	jsonOut                   string
	only                      string
	starts, calls, swaps      int
	idle                      time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.ours, "ours", "", "our sidecar binary; empty = build ./cmd/sidecar into --bin-dir")
	flag.StringVar(&o.peer, "peer", "", "peer binary; empty = build "+peerPackage+" into --bin-dir")
	flag.StringVar(&o.floor, "floor", "", "the design card's libraries alone (test/bench/floor); empty = build it with make build-floor into --bin-dir")
	flag.StringVar(&o.binDir, "bin-dir", filepath.Join(harness.RepoRoot(), "bin"), "where built binaries go")
	flag.StringVar(&o.jsonOut, "json", filepath.Join(harness.RepoRoot(), "bin", "bench.json"), "machine-readable result")
	flag.IntVar(&o.starts, "starts", 20, "starts per binary for start to socket ready")
	flag.IntVar(&o.calls, "calls", 1000, "hook calls (load before RSS, and Manager latency)")
	flag.IntVar(&o.swaps, "swaps", 500, "kubelet swap -> waiting hook rounds")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "idle window for CPU ticks and context switches")
	flag.StringVar(&o.only, "only", "", `measure one figure: "largest" = peak RSS under the largest legal inputs (ours only)`)
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "sidecarbench: cannot measure: %v\n", err)
		os.Exit(1)
	}
}

func run(o options, stdout io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: KubeVirt's hook Manager and the passt sidecar use %s", harness.HooksRoot)
	}
	// The Manager logs every collection through KubeVirt's logger; keep the table readable.
	log.Log.SetIOWriter(io.Discard)
	if err := buildBinaries(&o); err != nil {
		return err
	}
	unlock, err := lockHooksRoot()
	if err != nil {
		return err
	}
	defer unlock()

	res := &bench.Result{
		Timestamp: time.Now().UTC().Format(time.RFC3339),
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		NumCPU:    runtime.NumCPU(),
		Params:    bench.Params{Starts: o.starts, Calls: o.calls, Swaps: o.swaps, IdleSeconds: o.idle.Seconds()},
		Ours:      bench.BinaryResult{Name: "sriov-udn-binding", Path: o.ours},
		Peer:      bench.BinaryResult{Name: "network-passt-binding (KubeVirt of test/go.mod)", Path: o.peer},
		Floor:     bench.BinaryResult{Name: "floor: grpc-go + KubeVirt's hook types, do-nothing handlers (test/bench/floor)", Path: o.floor},
	}
	for _, b := range []*bench.BinaryResult{&res.Ours, &res.Peer, &res.Floor} {
		if b.Path == "" {
			continue // not built: --only
		}
		st, err := os.Stat(b.Path)
		if err != nil {
			return fmt.Errorf("size of %s: %w", b.Path, err)
		}
		b.SizeBytes = st.Size()
	}

	env, err := newEnv(o.ours, o.peer, o.floor)
	if err != nil {
		return err
	}
	defer env.cleanup()

	switch o.only {
	case "":
	case "largest":
		if err := env.measureLargest(res); err != nil {
			return err
		}
		if err := res.WriteLargestTable(stdout); err != nil {
			return err
		}
		return writeJSON(o.jsonOut, res)
	default:
		return fmt.Errorf("--only %q: the one figure measurable alone is \"largest\"", o.only)
	}

	if err := env.measureStarts(res, o.starts); err != nil {
		return err
	}
	if err := env.measureCopies(res, o); err != nil {
		return err
	}
	if err := env.measureRunning(res, o); err != nil {
		return err
	}
	if err := env.measureHostile(res); err != nil {
		return err
	}
	// Last: it rewrites the volumes with 64 interfaces.
	if err := env.measureLargest(res); err != nil {
		return err
	}
	for _, n := range []int{1, 8, 64} {
		rr, err := bench.MeasureRender(n)
		if err != nil {
			return err
		}
		res.Render = append(res.Render, rr)
	}
	res.ComputeRatios()
	if !res.Hook.NetworkDataChanged {
		res.Notes = append(res.Notes, "PreCloudInitIso left NetworkData unchanged: the sidecar passes through, so hook and swap figures are the pass-through floor")
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	return writeJSON(o.jsonOut, res)
}

// buildBinaries builds whichever binary was not given: ours with `make build` (the Makefile holds its
// build tags and flags), the peer with the same flags and no tags, as KubeVirt builds it.
func buildBinaries(o *options) error {
	if err := os.MkdirAll(o.binDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.binDir, err)
	}
	if o.ours == "" {
		out, err := filepath.Abs(filepath.Join(o.binDir, "sriov-udn-binding"))
		if err != nil {
			return fmt.Errorf("path of sriov-udn-binding: %w", err)
		}
		if err := harness.MakeBuild(out); err != nil {
			return err
		}
		o.ours = out
	}
	if o.only != "" { // one figure alone is ours only: no peer, no floor
		return nil
	}
	if o.floor == "" {
		floor, err := filepath.Abs(filepath.Join(o.binDir, "bench-floor"))
		if err != nil {
			return fmt.Errorf("path of bench-floor: %w", err)
		}
		cmd := exec.Command("make", "--no-print-directory", "build-floor", "FLOOR_BIN="+floor)
		cmd.Dir = harness.RepoRoot()
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("make build-floor FLOOR_BIN=%s: %w\n%s", floor, err, msg)
		}
		o.floor = floor
	}
	if o.peer != "" {
		return nil
	}
	out, err := filepath.Abs(filepath.Join(o.binDir, "network-passt-binding"))
	if err != nil {
		return fmt.Errorf("path of network-passt-binding: %w", err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, peerPackage)
	cmd.Dir = filepath.Join(harness.RepoRoot(), "test")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", peerPackage, err, msg)
	}
	o.peer = out
	return nil
}

// lockHooksRoot takes the same flock as harness.LockHooksRoot (which needs a testing.TB): no test
// may run its sidecars under the hooks root while the bench does.
func lockHooksRoot() (func(), error) {
	if err := os.MkdirAll(harness.HooksRoot, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", harness.HooksRoot, err)
	}
	f, err := os.OpenFile(harness.LockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", harness.LockFile, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("flock %s: %w", harness.LockFile, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

func writeJSON(path string, res *bench.Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal result: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// env is one run's sockets, pod (ours: harness.Pod under the hooks root) and binaries.
type env struct {
	ours, peer, floor string
	pod               *harness.Pod
	peerSock          string
	data              string
	oursArgs          []string
	// oursEnv is the image's environment (the Go runtime's settings), as KubeVirt runs the image.
	oursEnv []string
}

func newEnv(ours, peer, floor string) (*env, error) {
	e := &env{ours: ours, peer: peer, floor: floor, peerSock: filepath.Join(harness.HooksRoot, peerSocket)}
	sidecarDir := filepath.Join(harness.HooksRoot, sidecarSubdir)
	var err error
	if e.oursEnv, err = harness.ImageEnv(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(e.peerSock); err == nil {
		// A socket nobody listens on is left over from a killed run: remove it. One that accepts
		// belongs to a passt sidecar running outside the lock: measuring beside it would be wrong.
		if c, err := net.Dial("unix", e.peerSock); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("%s accepts connections while we hold %s: another passt sidecar is running", e.peerSock, harness.LockFile)
		}
		if err := os.Remove(e.peerSock); err != nil {
			return nil, fmt.Errorf("remove stale %s: %w", e.peerSock, err)
		}
	}
	if err := os.RemoveAll(sidecarDir); err != nil {
		return nil, fmt.Errorf("remove stale %s: %w", sidecarDir, err)
	}
	data, err := os.MkdirTemp("", "sidecarbench")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	e.data = data
	if e.pod, err = harness.NewPod(sidecarDir, data); err != nil {
		return nil, err
	}
	// Data ready from the start: the hook-latency figure is "with data ready".
	ifaces := bench.Ifaces(1, bench.BaseNAD)
	ann, err := bench.Annotations(ifaces, 0)
	if err != nil {
		return nil, err
	}
	if err := e.pod.WritePodInfo(map[string]string{"app": "bench"}, ann); err != nil {
		return nil, err
	}
	netInfo, err := bench.NetworkInfoJSON(ifaces)
	if err != nil {
		return nil, err
	}
	if err := e.pod.WriteDeviceInfo(netInfo); err != nil {
		return nil, err
	}
	// Ours serves both protocols, as with manifests/overlays/plugin: the hook socket and the Plugin API's.
	pluginDir := filepath.Join(data, "kubevirt-plugin")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", pluginDir, err)
	}
	e.oursArgs = e.pod.Args("--plugin-socket", filepath.Join(pluginDir, "domain.sock"), "--wait-timeout", "45s")
	return e, nil
}

func (e *env) cleanup() {
	_ = os.RemoveAll(e.pod.HooksDir)
	_ = os.Remove(e.peerSock)
	if e.data != "" {
		_ = os.RemoveAll(e.data)
	}
}

func (e *env) startOurs(withLines bool) (*bench.Process, error) {
	return bench.StartProcess(e.ours, e.oursArgs, e.oursEnv, e.pod.Socket(), withLines)
}

func (e *env) startPeer() (*bench.Process, error) {
	return bench.StartProcess(e.peer, nil, nil, e.peerSock, false)
}

// copiesN is how many copies of each sidecar run at once for the PSS figures: several VM pods on a node.
const copiesN = 4

// measureCopies runs copiesN copies of ours, of the peer and of the floor at once, each copy as a pod runs
// it: ours with a socket directory of its own, the peer (whose socket path is fixed) in a mount namespace of
// its own with a directory bound over the hooks root, as each virt-launcher pod has its own emptyDir there;
// the floor with ours' image environment, on a socket of its own.
func (e *env) measureCopies(res *bench.Result, o options) error {
	vmi := bench.VMI(bench.Ifaces(1, bench.BaseNAD))
	startOurs := func(i int) (*bench.Process, error) {
		dir := filepath.Join(e.data, fmt.Sprintf("ours-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		args := append([]string{}, e.oursArgs...)
		for j := range args {
			if args[j] == "--socket-dir" {
				args[j+1] = dir
			}
			if args[j] == "--plugin-socket" {
				args[j+1] = filepath.Join(dir, "domain.sock")
			}
		}
		return bench.StartProcess(e.ours, args, e.oursEnv, filepath.Join(dir, harness.SocketName), false)
	}
	startPeer := func(i int) (*bench.Process, error) {
		dir := filepath.Join(e.data, fmt.Sprintf("passt-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		// unshare execs sh, which execs the peer: one process, the pid StartProcess records.
		args := []string{"--mount", "--propagation", "private", "--", "sh", "-c",
			`mount --bind "$0" "$1" && exec "$2"`, dir, harness.HooksRoot, e.peer}
		return bench.StartProcess("unshare", args, nil, filepath.Join(dir, peerSocket), false)
	}
	var err error
	if res.Copies.Ours, err = bench.MeasureCopies(startOurs, copiesN, o.calls, vmi, settle); err != nil {
		return fmt.Errorf("copies of ours: %w", err)
	}
	if res.Copies.Peer, err = bench.MeasureCopies(startPeer, copiesN, o.calls, vmi, settle); err != nil {
		return fmt.Errorf("copies of the peer: %w", err)
	}
	startFloor := func(i int) (*bench.Process, error) {
		sock := filepath.Join(e.data, fmt.Sprintf("floor-%d.sock", i))
		return bench.StartProcess(e.floor, []string{sock}, e.oursEnv, sock, false)
	}
	if res.Copies.Floor, err = bench.MeasureCopies(startFloor, copiesN, o.calls, vmi, settle); err != nil {
		return fmt.Errorf("copies of the floor: %w", err)
	}
	return nil
}

// measureHostile runs each hostile-peer category (test/hostile) against a fresh instance of ours and records
// its peak RSS; then ours must still answer Info and OnDefineDomain.
func (e *env) measureHostile(res *bench.Result) error {
	vmi := bench.VMI(bench.Ifaces(1, bench.BaseNAD))
	vmiJSON, err := json.Marshal(vmi)
	if err != nil {
		return fmt.Errorf("marshal VMI: %w", err)
	}
	domainXML, err := bench.DomainXML()
	if err != nil {
		return err
	}
	for _, a := range hostile.Attacks() {
		p, err := e.startOurs(false)
		if err != nil {
			return err
		}
		o, err := hostile.Run(a, p.Socket, p.Pid())
		if err == nil {
			if _, err = bench.CallInfo(p.Socket); err == nil {
				err = bench.CallOnDefineDomain(p.Socket, domainXML, vmiJSON)
			}
		}
		res.Hostile = append(res.Hostile, bench.HostileOutcome{Name: o.Name, Server: o.Server, PeakRSSKiB: o.PeakRSSKiB, Alive: o.Alive})
		if _, stopErr := p.Stop(stopTimeout); err == nil {
			err = stopErr
		}
		if err != nil {
			return fmt.Errorf("hostile peer %q: %w", a.Name, err)
		}
	}
	return nil
}

// measureLargest starts a fresh instance of ours on volumes holding 64 interfaces and 256 KiB of
// annotations, sends it the largest legal inputs (and inputs past the limits), and records VmHWM.
func (e *env) measureLargest(res *bench.Result) error {
	ifaces := bench.Ifaces(bench.LargestNICs, bench.BaseNAD)
	ann, err := bench.Annotations(ifaces, bench.LargestAnnotations)
	if err != nil {
		return err
	}
	if err := e.pod.WritePodInfo(map[string]string{"app": "bench"}, ann); err != nil {
		return err
	}
	netInfo, err := bench.NetworkInfoJSON(ifaces)
	if err != nil {
		return err
	}
	if err := e.pod.WriteDeviceInfo(netInfo); err != nil {
		return err
	}
	p, err := e.startOurs(false)
	if err != nil {
		return err
	}
	l, err := bench.MeasureLargest(p.Socket, p.Pid())
	if err != nil {
		p.Kill()
		return fmt.Errorf("largest inputs: %w", err)
	}
	res.Largest = &l
	if _, err := p.Stop(stopTimeout); err != nil {
		return err
	}
	return nil
}

// measureStarts alternates ours and the peer so that drift on a noisy machine hits both alike.
func (e *env) measureStarts(res *bench.Result, n int) error {
	var ours, peer []time.Duration
	for range n {
		for _, s := range []struct {
			start func() (*bench.Process, error)
			into  *[]time.Duration
		}{{func() (*bench.Process, error) { return e.startOurs(false) }, &ours}, {e.startPeer, &peer}} {
			p, err := s.start()
			if err != nil {
				return err
			}
			*s.into = append(*s.into, p.Ready)
			if _, err := p.Stop(stopTimeout); err != nil {
				return err
			}
		}
	}
	res.Ours.Start, res.Peer.Start = bench.Summarize(ours), bench.Summarize(peer)
	return nil
}

// measureRunning starts one instance of each, samples RSS at ready, lets both idle together for the
// window, loads both with the same Info+OnDefineDomain calls, then measures ours through the Manager.
func (e *env) measureRunning(res *bench.Result, o options) (err error) {
	ours, err := e.startOurs(true)
	if err != nil {
		return err
	}
	defer func() {
		if ours != nil {
			ours.Kill()
		}
	}()
	peer, err := e.startPeer()
	if err != nil {
		return err
	}
	defer func() {
		if peer != nil {
			peer.Kill()
		}
	}()
	procs := []struct {
		p *bench.Process
		r *bench.BinaryResult
	}{{ours, &res.Ours}, {peer, &res.Peer}}

	for _, x := range procs {
		s, err := bench.ReadProcStats(x.p.Pid())
		if err != nil {
			return err
		}
		x.r.ReadyRSSKiB = s.RSSKiB
	}
	time.Sleep(settle) // let start-up work (GC, scavenger) finish before the idle window opens
	before := make([]bench.ProcStats, len(procs))
	for i, x := range procs {
		if before[i], err = bench.ReadProcStats(x.p.Pid()); err != nil {
			return err
		}
	}
	t0 := time.Now()
	time.Sleep(o.idle)
	window := time.Since(t0).Seconds()
	for i, x := range procs {
		after, err := bench.ReadProcStats(x.p.Pid())
		if err != nil {
			return err
		}
		x.r.IdleRSSKiB, x.r.IdleAnonKiB, x.r.IdleFileKiB = after.RSSKiB, after.AnonKiB, after.FileKiB
		x.r.Threads = after.Threads
		x.r.IdleWindowSeconds = window
		x.r.IdleTicks = after.Ticks - before[i].Ticks
		x.r.IdleContextSwitches = after.ContextSwitches() - before[i].ContextSwitches()
	}

	vmi := bench.VMI(bench.Ifaces(1, bench.BaseNAD))
	for _, x := range procs {
		if x.r.DefineDomain, err = bench.Load(x.p.Socket, o.calls, vmi); err != nil {
			return fmt.Errorf("%s: %w", x.r.Name, err)
		}
	}
	time.Sleep(settle)
	for _, x := range procs {
		s, err := bench.ReadProcStats(x.p.Pid())
		if err != nil {
			return err
		}
		x.r.RSSAfterCallsKiB, x.r.AfterCallsAnonKiB, x.r.AfterCallsFileKiB = s.RSSKiB, s.AnonKiB, s.FileKiB
	}

	mgr := hooks.GetManager()
	if err := mgr.Collect(1, 10*time.Second); err != nil {
		return fmt.Errorf("hook Manager Collect: %w", err)
	}
	for i, x := range procs {
		if before[i], err = bench.ReadProcStats(x.p.Pid()); err != nil {
			return err
		}
	}
	if res.Hook, err = bench.MeasureHookLatency(mgr, ours.Socket, peer.Socket, vmi, o.calls); err != nil {
		return err
	}
	for i, x := range procs {
		after, err := bench.ReadProcStats(x.p.Pid())
		if err != nil {
			return err
		}
		x.r.HookTicks = after.Ticks - before[i].Ticks
	}
	// Lines drops what nobody reads, so the sidecar never blocks on stderr; MeasureSwap drains it.
	if res.Swap, err = bench.MeasureSwap(mgr, e.pod, ours.Lines, o.swaps); err != nil {
		return err
	}

	for _, x := range procs {
		s, err := bench.ReadProcStats(x.p.Pid())
		if err != nil {
			return err
		}
		x.r.PeakRSSKiB = s.HWMKiB
	}
	for _, x := range procs {
		code, err := x.p.Stop(stopTimeout)
		x.r.StopExitCode = code
		if err != nil {
			return err
		}
	}
	ours, peer = nil, nil
	return nil
}
