package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// BinaryResult is what the bench measures of one sidecar binary.
type BinaryResult struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	// Start is exec to first accepted connection, over every start.
	Start Summary `json:"start_to_ready"`
	// ReadyRSSKiB is VmRSS at socket ready; IdleRSSKiB after the settle and idle window;
	// RSSAfterCallsKiB after the Info+OnDefineDomain load and a settle; PeakRSSKiB is VmHWM at the end.
	ReadyRSSKiB      int64 `json:"ready_rss_kib"`
	IdleRSSKiB       int64 `json:"idle_rss_kib"`
	RSSAfterCallsKiB int64 `json:"rss_after_calls_kib"`
	PeakRSSKiB       int64 `json:"peak_rss_kib"`
	// DefineDomain is one round of direct Info + OnDefineDomain (the load before RSSAfterCallsKiB).
	DefineDomain Summary `json:"info_on_define_domain"`
	// Anon/File split of IdleRSSKiB and RSSAfterCallsKiB (RssAnon, RssFile).
	IdleAnonKiB       int64 `json:"idle_rss_anon_kib"`
	IdleFileKiB       int64 `json:"idle_rss_file_kib"`
	AfterCallsAnonKiB int64 `json:"rss_after_calls_anon_kib"`
	AfterCallsFileKiB int64 `json:"rss_after_calls_file_kib"`
	Threads           int64 `json:"threads"`
	// Idle window: CPU ticks (USER_HZ) and context switches (all threads) while nobody calls.
	IdleWindowSeconds   float64 `json:"idle_window_s"`
	IdleTicks           int64   `json:"idle_ticks"`
	IdleContextSwitches int64   `json:"idle_context_switches"`
	// HookTicks is the sidecar's own CPU (utime+stime, USER_HZ ticks, all threads) over the Info +
	// PreCloudInitIso rounds of HookLatency: what the server side of those rounds costs, the handler included.
	HookTicks int64 `json:"hook_rounds_ticks"`
	// StopExitCode is the exit code after SIGTERM (-1 when it had to be killed).
	StopExitCode int `json:"stop_exit_code"`
}

// Result is the whole benchmark run (bin/bench.json).
type Result struct {
	Timestamp string       `json:"timestamp"`
	GoVersion string       `json:"go_version"`
	Platform  string       `json:"platform"`
	NumCPU    int          `json:"num_cpu"`
	Params    Params       `json:"params"`
	Ours      BinaryResult `json:"ours"`
	Peer      BinaryResult `json:"peer"`
	// Floor is test/bench/floor: grpc-go serving KubeVirt's hook types with do-nothing handlers, built as
	// ours is. Only its size and its copies are measured: what the design card's libraries cost alone.
	Floor  BinaryResult   `json:"floor"`
	Hook   HookLatency    `json:"hook_latency"`
	Swap   SwapLatency    `json:"swap_latency"`
	Render []RenderResult `json:"render"`
	// Largest is peak RSS under the largest legal inputs (ours only; nil when not measured).
	Largest *LargestResult `json:"largest,omitempty"`
	// Copies is the footprint with several copies of each running at once (what a node with one VM pod per
	// copy pays), ours and the peer's.
	Copies struct {
		Ours  CopiesResult `json:"ours"`
		Peer  CopiesResult `json:"peer"`
		Floor CopiesResult `json:"floor"`
	} `json:"copies"`
	// Hostile is ours under each hostile-peer category (test/hostile), a fresh instance each.
	Hostile []HostileOutcome `json:"hostile,omitempty"`
	// Ratios are ours / peer for each figure both have (the machines are noisy; ratios less so).
	Ratios map[string]float64 `json:"ratios"`
	Notes  []string           `json:"notes,omitempty"`
}

// HostileOutcome is the sidecar's peak under one hostile-peer category (test/hostile Outcome).
type HostileOutcome struct {
	Name       string `json:"name"`
	Server     string `json:"server"`
	PeakRSSKiB int64  `json:"peak_rss_kib"`
	Alive      bool   `json:"alive"`
}

// Params are the run's sizes.
type Params struct {
	Starts      int     `json:"starts"`
	Calls       int     `json:"calls"`
	Swaps       int     `json:"swaps"`
	IdleSeconds float64 `json:"idle_s"`
}

// ComputeRatios fills r.Ratios from Ours and Peer.
func (r *Result) ComputeRatios() {
	r.Ratios = map[string]float64{
		"size":              ratio(float64(r.Ours.SizeBytes), float64(r.Peer.SizeBytes)),
		"start_p50":         ratio(r.Ours.Start.P50Ms, r.Peer.Start.P50Ms),
		"idle_rss":          ratio(float64(r.Ours.IdleRSSKiB), float64(r.Peer.IdleRSSKiB)),
		"idle_anon":         ratio(float64(r.Ours.IdleAnonKiB), float64(r.Peer.IdleAnonKiB)),
		"define_domain_p50": ratio(r.Ours.DefineDomain.P50Ms, r.Peer.DefineDomain.P50Ms),
		"define_domain_p99": ratio(r.Ours.DefineDomain.P99Ms, r.Peer.DefineDomain.P99Ms),
		"rss_after_calls":   ratio(float64(r.Ours.RSSAfterCallsKiB), float64(r.Peer.RSSAfterCallsKiB)),
		"idle_ticks":        ratio(float64(r.Ours.IdleTicks), float64(r.Peer.IdleTicks)),
		"idle_ctx_switches": ratio(float64(r.Ours.IdleContextSwitches), float64(r.Peer.IdleContextSwitches)),
		"hook_p50":          ratio(r.Hook.Ours.Total.P50Ms, r.Hook.Peer.Total.P50Ms),
		"hook_p99":          ratio(r.Hook.Ours.Total.P99Ms, r.Hook.Peer.Total.P99Ms),
		"hook_ticks":        ratio(float64(r.Ours.HookTicks), float64(r.Peer.HookTicks)),
		"hook_no_gc_p50":    ratio(r.Hook.Ours.NoBenchGC.P50Ms, r.Hook.Peer.NoBenchGC.P50Ms),
		"hook_no_gc_p99":    ratio(r.Hook.Ours.NoBenchGC.P99Ms, r.Hook.Peer.NoBenchGC.P99Ms),
		"copies_idle_anon":  ratio(float64(r.Copies.Ours.IdleAnonKiB), float64(r.Copies.Peer.IdleAnonKiB)),
		"copies_idle_pss":   ratio(float64(r.Copies.Ours.IdlePSSKiB), float64(r.Copies.Peer.IdlePSSKiB)),
		"copies_calls_anon": ratio(float64(r.Copies.Ours.AfterCallsAnonKiB), float64(r.Copies.Peer.AfterCallsAnonKiB)),
		"copies_calls_pss":  ratio(float64(r.Copies.Ours.AfterCallsPSSKiB), float64(r.Copies.Peer.AfterCallsPSSKiB)),
		// The floor's figures over the peer's: how much of each budget the libraries alone take.
		"floor_size":              ratio(float64(r.Floor.SizeBytes), float64(r.Peer.SizeBytes)),
		"floor_copies_idle_anon":  ratio(float64(r.Copies.Floor.IdleAnonKiB), float64(r.Copies.Peer.IdleAnonKiB)),
		"floor_copies_idle_pss":   ratio(float64(r.Copies.Floor.IdlePSSKiB), float64(r.Copies.Peer.IdlePSSKiB)),
		"floor_copies_calls_anon": ratio(float64(r.Copies.Floor.AfterCallsAnonKiB), float64(r.Copies.Peer.AfterCallsAnonKiB)),
	}
}

// ratio is a/b rounded to 2 decimals; -1 when b is 0 (JSON has no NaN or Inf).
func ratio(a, b float64) float64 {
	if b == 0 {
		return -1
	}
	return math.Round(a/b*100) / 100
}

// userHZ is the kernel's USER_HZ, the unit of /proc/<pid>/stat's utime and stime: 100 on Linux.
const userHZ = 100

// floorLibs names what the floor binary is, in the table.
const floorLibs = "grpc-go + KubeVirt's hook types, handlers that do nothing"

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }
func anonFile(anon, file int64) string {
	return fmt.Sprintf("%.1f / %.1f MiB", float64(anon)/1024, float64(file)/1024)
}
func mibBytes(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func msf(v float64) string    { return fmt.Sprintf("%.2f ms", v) }
func p50p99(s Summary) string { return fmt.Sprintf("%.2f / %.2f ms", s.P50Ms, s.P99Ms) }
func ratioText(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// WriteTable prints the human-readable table.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	row("figure", "ours", "peer (passt)", "ours/peer", "target")
	row("------", "----", "------------", "---------", "------")
	row("binary size", mibBytes(r.Ours.SizeBytes), mibBytes(r.Peer.SizeBytes), ratioText(r.Ratios["size"]), "-")
	row(fmt.Sprintf("start to socket ready (median of %d)", r.Ours.Start.N), msf(r.Ours.Start.P50Ms), msf(r.Peer.Start.P50Ms), ratioText(r.Ratios["start_p50"]), "<= 0.8x peer")
	if c := r.Copies; c.Ours.Copies > 0 {
		row(fmt.Sprintf("private memory (anon), idle, largest of %d copies", c.Ours.Copies), mib(c.Ours.IdleAnonKiB), mib(c.Peer.IdleAnonKiB), ratioText(r.Ratios["copies_idle_anon"]), "<= peer")
		row(fmt.Sprintf("PSS per copy, %d copies running, idle", c.Ours.Copies), mib(c.Ours.IdlePSSKiB), mib(c.Peer.IdlePSSKiB), ratioText(r.Ratios["copies_idle_pss"]), "<= 0.5x peer")
		row(fmt.Sprintf("private memory (anon) after %d hook calls each, largest", c.Ours.Calls), mib(c.Ours.AfterCallsAnonKiB), mib(c.Peer.AfterCallsAnonKiB), ratioText(r.Ratios["copies_calls_anon"]), "<= peer")
		row(fmt.Sprintf("PSS per copy after %d hook calls each", c.Ours.Calls), mib(c.Ours.AfterCallsPSSKiB), mib(c.Peer.AfterCallsPSSKiB), ratioText(r.Ratios["copies_calls_pss"]), "-")
		if f := c.Floor; f.Copies > 0 {
			// The same figures for the libraries alone, in the "ours" column: what is left of each budget
			// for everything the sidecar does is the gap between this row and the target.
			row(fmt.Sprintf("floor (%s, %s): binary size", floorLibs, mibBytes(r.Floor.SizeBytes)), mibBytes(r.Floor.SizeBytes), mibBytes(r.Peer.SizeBytes), ratioText(r.Ratios["floor_size"]), "-")
			row("  floor: private memory (anon), idle, largest", mib(f.IdleAnonKiB), mib(c.Peer.IdleAnonKiB), ratioText(r.Ratios["floor_copies_idle_anon"]), "-")
			row(fmt.Sprintf("  floor: PSS per copy, %d copies running, idle", f.Copies), mib(f.IdlePSSKiB), mib(c.Peer.IdlePSSKiB), ratioText(r.Ratios["floor_copies_idle_pss"]), "-")
			row(fmt.Sprintf("  floor: private memory (anon) after %d hook calls each, largest", f.Calls), mib(f.AfterCallsAnonKiB), mib(c.Peer.AfterCallsAnonKiB), ratioText(r.Ratios["floor_copies_calls_anon"]), "-")
		}
	}
	row("idle RSS after start (one copy; binary pages shared by every copy on a node)", mib(r.Ours.IdleRSSKiB), mib(r.Peer.IdleRSSKiB), ratioText(r.Ratios["idle_rss"]), "-")
	row("  of which anon (private) / file (binary)", anonFile(r.Ours.IdleAnonKiB, r.Ours.IdleFileKiB), anonFile(r.Peer.IdleAnonKiB, r.Peer.IdleFileKiB), ratioText(r.Ratios["idle_anon"]), "-")
	row(fmt.Sprintf("idle RSS after %d hook calls", r.Params.Calls), mib(r.Ours.RSSAfterCallsKiB), mib(r.Peer.RSSAfterCallsKiB), ratioText(r.Ratios["rss_after_calls"]), "-")
	r.largestRows(row)
	for _, h := range r.Hostile {
		alive := ""
		if !h.Alive {
			alive = " (DIED)"
		}
		row("peak RSS, hostile peer: "+h.Name+alive, mib(h.PeakRSSKiB), "-", "-", "<= "+mib(PeakRSSLimitKiB))
	}
	row(fmt.Sprintf("CPU ticks over %.0f s idle", r.Params.IdleSeconds), fmt.Sprint(r.Ours.IdleTicks), fmt.Sprint(r.Peer.IdleTicks), ratioText(r.Ratios["idle_ticks"]), "0")
	row(fmt.Sprintf("context switches over %.0f s idle", r.Params.IdleSeconds), fmt.Sprint(r.Ours.IdleContextSwitches), fmt.Sprint(r.Peer.IdleContextSwitches), ratioText(r.Ratios["idle_ctx_switches"]), "-")
	row(fmt.Sprintf("hook Info+OnDefineDomain p50/p99 (n=%d)", r.Ours.DefineDomain.N), p50p99(r.Ours.DefineDomain), p50p99(r.Peer.DefineDomain),
		ratioText(r.Ratios["define_domain_p50"])+" / "+ratioText(r.Ratios["define_domain_p99"]), "-")
	hookNote := ""
	if !r.Hook.NetworkDataChanged {
		hookNote = " (pass-through)"
	}
	row(fmt.Sprintf("hook Info+PreCloudInitIso p50/p99 (n=%d)%s", r.Hook.Ours.Total.N, hookNote), p50p99(r.Hook.Ours.Total), p50p99(r.Hook.Peer.Total),
		ratioText(r.Ratios["hook_p50"])+" / "+ratioText(r.Ratios["hook_p99"]), "<= 1.0x peer")
	row(fmt.Sprintf("  the sidecar's own CPU over those rounds (ticks of %d ms)", 1000/userHZ), fmt.Sprint(r.Ours.HookTicks), fmt.Sprint(r.Peer.HookTicks),
		ratioText(r.Ratios["hook_ticks"]), "-")
	row(fmt.Sprintf("  rounds without GC in the bench (n=%d/%d)", r.Hook.Ours.NoBenchGC.N, r.Hook.Peer.NoBenchGC.N), p50p99(r.Hook.Ours.NoBenchGC), p50p99(r.Hook.Peer.NoBenchGC),
		ratioText(r.Ratios["hook_no_gc_p50"])+" / "+ratioText(r.Ratios["hook_no_gc_p99"]), "-")
	if r.Swap.Waited > 0 {
		row(fmt.Sprintf("kubelet swap -> waiting hook p50/p99 (n=%d)", r.Swap.Waited), p50p99(r.Swap.FromWrite), "-", "-", "p99 <= 5 ms")
	}
	if r.Swap.ReturnedEarly > 0 {
		row(fmt.Sprintf("hook did not wait for the swap (n=%d): call p50/p99", r.Swap.ReturnedEarly), p50p99(r.Swap.EarlyCall), "-", "-", "-")
	}
	for _, rr := range r.Render {
		row(fmt.Sprintf("render %d iface(s), %d KiB annotations p50/p99", rr.Interfaces, rr.AnnotationBytes>>10), p50p99(rr.Total), "-", "-", renderTarget(rr.Interfaces))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// largestRows prints peak RSS under the largest legal inputs beside the idle figures.
func (r *Result) largestRows(row func(...string)) {
	l := r.Largest
	if l == nil {
		return
	}
	row(fmt.Sprintf("peak RSS, largest legal inputs (%d NICs, %d KiB annotations)", l.NICs, l.AnnotationBytes>>10), mib(l.PeakRSSKiB), "-", "-", "<= "+mib(LegalPeakRSSKiB))
	row("  after 1 MiB networkData (each format), 1 MiB Secret user data (each escape-heavy class)", mib(l.BeforeDomainKiB), "-", "-", "-")
	row(fmt.Sprintf("  after OnDefineDomain, %.1f MiB domain", float64(l.DomainBytes)/(1<<20)), mib(l.PeakRSSKiB), "-", "-", "-")
	if lr := l.LargestRequest; lr.Name != "" {
		verdict := "refused, naming its fields, size and limit"
		if lr.Accepted {
			verdict = "accepted"
		}
		row("peak RSS, largest request ("+lr.Name+"): "+verdict, mib(lr.PeakAfterKiB), "-", "-", "<= "+mib(LegalPeakRSSKiB))
	}
}

// WriteLargestTable prints only the largest-input figures (sidecarbench --only largest).
func (r *Result) WriteLargestTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	row("figure", "ours", "peer (passt)", "ours/peer", "target")
	row("------", "----", "------------", "---------", "------")
	if r.Largest != nil {
		row("peak RSS at socket ready", mib(r.Largest.ReadyPeakKiB), "-", "-", "-")
	}
	r.largestRows(row)
	if r.Largest != nil {
		for _, in := range r.Largest.Inputs {
			verdict := "merged"
			if !in.Accepted {
				verdict = "rejected"
			}
			row(fmt.Sprintf("  %s: %s in %.0f ms", in.Name, verdict, float64(in.Duration)/1e6), mib(in.PeakAfterKiB), "-", "-", "-")
		}
	}
	return tw.Flush()
}

func renderTarget(n int) string {
	if n == 64 {
		return "<= 5 ms"
	}
	return "linear"
}
