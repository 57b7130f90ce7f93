package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
)

// helperEnv makes the test binary act as a tiny sidecar: listen on the named unix socket until SIGTERM.
const helperEnv = "SIDECARBENCH_HELPER_SOCKET"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		os.Exit(helperListen(path))
	}
	os.Exit(m.Run())
}

func helperListen(path string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	<-sig
	_ = l.Close()
	return 0
}

func TestStartProcess_ReportsReadyOnceTheSocketAcceptsAndStopsOnSIGTERM(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "helper.sock")
	t.Setenv(helperEnv, socket)
	// StartProcess gives the child only PATH; the helper needs its variable, so wrap it in env(1).
	env, err := os.Executable()
	require.NoError(t, err)
	p, err := StartProcess("/usr/bin/env", []string{helperEnv + "=" + socket, env}, nil, socket, true)
	require.NoError(t, err)
	assert.Positive(t, p.Ready)
	assert.Less(t, p.Ready, readyTimeout)
	c, err := net.Dial("unix", socket)
	require.NoError(t, err, "the socket accepts once StartProcess returned")
	require.NoError(t, c.Close())

	s, err := ReadProcStats(p.Pid())
	require.NoError(t, err)
	assert.Positive(t, s.RSSKiB)
	assert.Positive(t, s.Threads)

	code, err := p.Stop(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
}

func TestStartProcess_FailsWhenTheBinaryExitsBeforeListening(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "never.sock")
	_, err := StartProcess("/bin/false", nil, nil, socket, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited before listening")
}

func TestParseStatTicks_CountsFieldsAfterTheLastParenthesis(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 %d %d 0 0 20 0 9 0 100 2000 300"
	tests := []struct {
		name    string
		comm    string
		utime   int
		stime   int
		want    int64
		wantErr bool
	}{
		{name: "plain name", comm: "(sidecar)", utime: 7, stime: 5, want: 12},
		{name: "name with spaces and parentheses", comm: "(a) b (c))", utime: 100, stime: 1, want: 101},
		{name: "no parenthesis", comm: "sidecar", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatTicks([]byte("42 " + tc.comm + fmt.Sprintf(tail, tc.utime, tc.stime)))
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := ParseStatTicks([]byte("42 (x) S 1 2"))
	assert.Error(t, err, "a truncated line has no utime/stime")
}

func TestParseStatus_ReadsKiBAndCountersAndRejectsAFileWithoutSwitches(t *testing.T) {
	status := "Name:\tsidecar\nState:\tS (sleeping)\nVmHWM:\t   13000 kB\nVmRSS:\t   12288 kB\nThreads:\t7\n" +
		"voluntary_ctxt_switches:\t15\nnonvoluntary_ctxt_switches:\t2\n"
	got, err := ParseStatus([]byte(status))
	require.NoError(t, err)
	assert.Equal(t, int64(12288), got["VmRSS"])
	assert.Equal(t, int64(13000), got["VmHWM"])
	assert.Equal(t, int64(7), got["Threads"])
	assert.Equal(t, int64(15), got["voluntary_ctxt_switches"])
	assert.Equal(t, int64(2), got["nonvoluntary_ctxt_switches"])
	assert.NotContains(t, got, "State", "non-numeric fields are skipped")

	_, err = ParseStatus([]byte("VmRSS:\t1 kB\n"))
	assert.Error(t, err)
}

func TestReadProcStats_SumsSwitchesOverThreads(t *testing.T) {
	s, err := ReadProcStats(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, s.RSSKiB)
	assert.GreaterOrEqual(t, s.HWMKiB, s.RSSKiB)
	assert.Positive(t, s.AnonKiB)
	assert.Positive(t, s.FileKiB, "the test binary's own pages are file-backed")
	assert.LessOrEqual(t, s.AnonKiB+s.FileKiB, s.RSSKiB, "RssShmem is the rest")
	assert.Greater(t, s.Threads, int64(1), "a Go test process has several threads")
	assert.Positive(t, s.ContextSwitches())
}

func TestSummarize_UsesNearestRankPercentiles(t *testing.T) {
	ds := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- { // unsorted input
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{name: "empty", in: nil, want: Summary{}},
		{name: "one", in: []time.Duration{1500 * time.Microsecond},
			want: Summary{N: 1, MinMs: 1.5, P50Ms: 1.5, P90Ms: 1.5, P99Ms: 1.5, MaxMs: 1.5, MeanMs: 1.5}},
		{name: "1..100 ms", in: ds,
			want: Summary{N: 100, MinMs: 1, P50Ms: 50, P90Ms: 90, P99Ms: 99, MaxMs: 100, MeanMs: 50.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Summarize(tc.in))
		})
	}
}

func TestHashedPodIfaceName_MatchesTheSidecarsNaming(t *testing.T) {
	for _, network := range []string{"udn0", "swap17", "a-much-longer-network-name"} {
		got := HashedPodIfaceName(network)
		assert.Len(t, got, 14)
		assert.Equal(t, model.HashedPodInterfaceName(network), got, network)
	}
}

func TestFixtures_AreUnderstoodByTheSidecarsModel(t *testing.T) {
	for _, n := range []int{1, 8, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ifaces := Ifaces(n, BaseNAD)
			ann, err := Annotations(ifaces, 0)
			require.NoError(t, err)
			snap := downwardapi.SnapshotFromMaps(nil, ann)
			require.Empty(t, snap.Problems)
			vmi := kubevirtjson.VMI(t, VMI(ifaces))
			opts := model.Options{BindingName: BindingName}
			assert.Empty(t, model.MissingForCloudInit(vmi, snap, opts), "data is ready")
			bound, err := model.Build(vmi, snap, opts)
			require.NoError(t, err)
			assert.NoError(t, checkBound(bound, ifaces))

			// What PreCloudInitIso does next: the pod NIC joins with DHCP (it needs a MAC for
			// that), and the merge into the VMI's NoCloud data must succeed.
			nic, err := model.FindPodNIC(vmi, snap, BindingName)
			require.NoError(t, err, "the pod-network NIC of the bench VMI")
			require.NotNil(t, nic)
			in, err := CloudInitData(VMI(ifaces))
			require.NoError(t, err)
			raw, err := json.Marshal(in)
			require.NoError(t, err)
			_, err = cloudinit.Apply(raw, bound, nic.Interface)
			assert.NoError(t, err)
		})
	}
}

func TestAnnotations_PadToTheRequestedSize(t *testing.T) {
	ann, err := Annotations(Ifaces(2, BaseNAD), RenderAnnotationBytes)
	require.NoError(t, err)
	size := 0
	for k, v := range ann {
		size += len(k) + len(v)
	}
	assert.Equal(t, RenderAnnotationBytes, size)
}

func TestCloudInitData_ComesFromTheVMIsNoCloudVolume(t *testing.T) {
	d, err := CloudInitData(VMI(Ifaces(1, BaseNAD)))
	require.NoError(t, err)
	assert.Contains(t, d.UserData, "#cloud-config")
	require.NotNil(t, d.NoCloudMetaData)
	assert.NotEmpty(t, d.NoCloudMetaData.InstanceID)
}

func TestMeasureRender_ChecksEveryInterfaceAndTimesEachStage(t *testing.T) {
	rr, err := MeasureRender(8)
	require.NoError(t, err)
	assert.Equal(t, 8, rr.Interfaces)
	assert.GreaterOrEqual(t, rr.AnnotationBytes, RenderAnnotationBytes)
	assert.Positive(t, rr.OutputBytes)
	assert.GreaterOrEqual(t, rr.Total.N, renderMinRounds)
	assert.Positive(t, rr.Total.P50Ms)
	assert.GreaterOrEqual(t, rr.Total.P99Ms, rr.Render.P50Ms)
}

func TestWriteTable_ShowsEveryFigureAndRatio(t *testing.T) {
	r := &Result{
		Params: Params{Starts: 20, Calls: 1000, Swaps: 500, IdleSeconds: 10},
		Ours: BinaryResult{SizeBytes: 10 << 20, Start: Summary{N: 20, P50Ms: 9}, IdleRSSKiB: 12 << 10, IdleAnonKiB: 1 << 10, IdleFileKiB: 11 << 10, RSSAfterCallsKiB: 13 << 10,
			DefineDomain: Summary{N: 1000, P50Ms: 1, P99Ms: 4}},
		Peer: BinaryResult{SizeBytes: 20 << 20, Start: Summary{N: 20, P50Ms: 18}, IdleRSSKiB: 18 << 10, RSSAfterCallsKiB: 26 << 10, IdleTicks: 1,
			DefineDomain: Summary{N: 1000, P50Ms: 2, P99Ms: 4}},
		Hook: HookLatency{
			Ours: HookFigures{Total: Summary{N: 1000, P50Ms: 0.5, P99Ms: 1.5}, NoBenchGC: Summary{N: 970, P50Ms: 0.5, P99Ms: 1.2}},
			Peer: HookFigures{Total: Summary{N: 1000, P50Ms: 0.4, P99Ms: 3}, NoBenchGC: Summary{N: 980, P50Ms: 0.4, P99Ms: 2.4}},
		},
		Swap:    SwapLatency{Waited: 500, FromWrite: Summary{N: 500, P50Ms: 1, P99Ms: 3}},
		Render:  []RenderResult{{Interfaces: 64, AnnotationBytes: 256 << 10, Total: Summary{P50Ms: 2, P99Ms: 4}}},
		Hostile: []HostileOutcome{{Name: "PING flood", PeakRSSKiB: 15 << 10, Alive: true}, {Name: "never", PeakRSSKiB: 1 << 10}},
		Notes:   []string{"a note"},
	}
	r.Copies.Ours = CopiesResult{Copies: 4, Calls: 1000, IdlePSSKiB: 4 << 10, IdleAnonKiB: 2 << 10, AfterCallsPSSKiB: 8 << 10, AfterCallsAnonKiB: 5 << 10}
	r.Copies.Peer = CopiesResult{Copies: 4, Calls: 1000, IdlePSSKiB: 10 << 10, IdleAnonKiB: 4 << 10, AfterCallsPSSKiB: 16 << 10, AfterCallsAnonKiB: 10 << 10}
	r.ComputeRatios()
	assert.Equal(t, 0.4, r.Ratios["copies_idle_pss"])
	assert.Equal(t, 0.5, r.Ratios["copies_calls_anon"])
	assert.Equal(t, 0.5, r.Ratios["size"])
	assert.Equal(t, 0.5, r.Ratios["start_p50"])
	assert.Equal(t, -1.0, r.Ratios["idle_anon"], "the peer's anon split is unset here")
	assert.Equal(t, 0.0, r.Ratios["idle_ticks"])
	assert.Equal(t, -1.0, r.Ratios["idle_ctx_switches"], "no ratio to a zero peer")
	assert.Equal(t, 1.25, r.Ratios["hook_p50"])
	assert.Equal(t, 0.5, r.Ratios["hook_no_gc_p99"])

	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	for _, want := range []string{
		"binary size", "10.0 MiB", "20.0 MiB", "start to socket ready (median of 20)", "9.00 ms",
		"private memory (anon), idle, largest of 4 copies", "<= peer", "PSS per copy, 4 copies running, idle", "<= 0.5x peer",
		"private memory (anon) after 1000 hook calls each, largest", "5.0 MiB", "10.0 MiB", "0.40",
		"peak RSS, hostile peer: PING flood", "15.0 MiB", "peak RSS, hostile peer: never (DIED)",
		"idle RSS after start", "12.0 MiB", "of which anon (private) / file (binary)", "1.0 / 11.0 MiB", "idle RSS after 1000 hook calls", "CPU ticks over 10 s idle",
		"hook Info+OnDefineDomain p50/p99 (n=1000)", "1.00 / 4.00 ms", "2.00 / 4.00 ms", "0.50 / 1.00",
		"hook Info+PreCloudInitIso p50/p99 (n=1000) (pass-through)", "0.50 / 1.50 ms", "0.40 / 3.00 ms", "1.25 / 0.50",
		"rounds without GC in the bench (n=970/980)", "0.50 / 1.20 ms", "0.40 / 2.40 ms", "the sidecar's own CPU over those rounds (ticks of 10 ms)",
		"kubelet swap -> waiting hook p50/p99 (n=500)", "1.00 / 3.00 ms",
		"render 64 iface(s), 256 KiB annotations", "2.00 / 4.00 ms", "<= 5 ms", "note: a note",
	} {
		assert.Contains(t, out.String(), want)
	}
	assert.NotContains(t, out.String(), "did not wait", "every round waited")
}

// The floor's rows show what the libraries alone take of each budget; a run that did not measure the floor
// prints none of them.
func TestWriteTable_FloorRowsOnlyWhenMeasured(t *testing.T) {
	r := &Result{Params: Params{Calls: 1000}, Peer: BinaryResult{SizeBytes: 24 << 20}, Floor: BinaryResult{SizeBytes: 7 << 20}}
	r.Copies.Ours = CopiesResult{Copies: 4, Calls: 1000, IdlePSSKiB: 3 << 10, IdleAnonKiB: 2 << 10}
	r.Copies.Peer = CopiesResult{Copies: 4, Calls: 1000, IdlePSSKiB: 6 << 10, IdleAnonKiB: 5 << 9, AfterCallsAnonKiB: 7 << 10}
	r.ComputeRatios()
	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	assert.NotContains(t, out.String(), "floor", "no floor measured, no floor rows")

	r.Copies.Floor = CopiesResult{Copies: 4, Calls: 1000, IdlePSSKiB: 2880, IdleAnonKiB: 1428, AfterCallsAnonKiB: 3 << 10}
	r.ComputeRatios()
	assert.Equal(t, 0.47, r.Ratios["floor_copies_idle_pss"])
	assert.Equal(t, 0.56, r.Ratios["floor_copies_idle_anon"])
	assert.Equal(t, 0.43, r.Ratios["floor_copies_calls_anon"])
	assert.Equal(t, 0.29, r.Ratios["floor_size"])
	out.Reset()
	require.NoError(t, r.WriteTable(&out))
	for _, want := range []string{
		"floor (grpc-go + KubeVirt's hook types, handlers that do nothing, 7.0 MiB): binary size",
		"floor: PSS per copy, 4 copies running, idle", "2.8 MiB", "0.47",
		"floor: private memory (anon), idle, largest", "1.4 MiB", "0.56",
		"floor: private memory (anon) after 1000 hook calls each, largest", "3.0 MiB", "0.43",
	} {
		assert.Contains(t, out.String(), want)
	}
}
