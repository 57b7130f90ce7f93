package downwardapi_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// leakSwaps is the number of kubelet swaps the leak test drives through one watcher.
const leakSwaps = 10_000

// openFDs counts this process's open file descriptors. os.ReadDir holds one of its own while reading,
// the same on every call.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

func TestKubeletVolume_10000Swaps_GoroutinesAndFDsStayFlat(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skipf("skipping: fd counting needs /proc/self/fd (Linux): %v", err)
	}
	// Tolerance for runtime-internal goroutines/fds (e.g. the GC's background workers); a leak of one
	// per swap would be thousands.
	const tolerance = 3
	dir := filepath.Join(t.TempDir(), "podinfo")
	vol := newVolume(t, dir)
	labels := map[string]string{"kubevirt.io": "virt-launcher"}
	require.NoError(t, vol.WritePodInfo(labels, map[string]string{"seq": "-1"}))

	goroutinesBefore := runtime.NumGoroutine()
	w, err := downwardapi.NewWatcher(downwardapi.Config{PodInfoDir: dir})
	require.NoError(t, err)

	// Warm up so lazily started runtime pieces are counted in the baseline.
	for i := range 10 {
		want := map[string]string{"seq": "warm" + strconv.Itoa(i)}
		require.NoError(t, vol.WritePodInfo(labels, want))
		wait(t, w, needAnnotations(want))
	}
	goroutinesStart, fdsStart := runtime.NumGoroutine(), openFDs(t)
	genStart := w.Snapshot().Generation

	for i := range leakSwaps {
		want := map[string]string{"seq": strconv.Itoa(i)}
		require.NoError(t, vol.WritePodInfo(labels, want))
		wait(t, w, needAnnotations(want))
	}

	goroutinesEnd, fdsEnd := runtime.NumGoroutine(), openFDs(t)
	assert.InDelta(t, goroutinesStart, goroutinesEnd, tolerance, "goroutines after %d swaps", leakSwaps)
	assert.InDelta(t, fdsStart, fdsEnd, tolerance, "open fds after %d swaps", leakSwaps)
	// Every swap changed content; coalescing may merge swaps, but never publishes more than one per swap.
	assert.LessOrEqual(t, w.Snapshot().Generation-genStart, uint64(leakSwaps))
	t.Logf("%d swaps: goroutines %d -> %d, fds %d -> %d, snapshots published %d",
		leakSwaps, goroutinesStart, goroutinesEnd, fdsStart, fdsEnd, w.Snapshot().Generation-genStart)

	require.NoError(t, w.Close())
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutinesBefore+tolerance, "Close stops every goroutine the watcher started")
}
