package container

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// documentedLimit is the sidecar container's memory limit the docs and manifests recommend
// (supportContainerResources, type sidecar): bench.MemoryLimitBytes.
const documentedLimit = bench.MemoryLimitBytes

var documentedLimitArg = strconv.Itoa(documentedLimit>>20) + "m"

// The largest legal inputs (test/bench largest.go: 1 MiB of user networkData in each format and 1 MiB inputs
// past the limits, 1 MiB of Secret user data in each worst case, 64 bound NICs, 256 KiB of annotations, three
// OnDefineDomain calls with a domain filling a 4 MiB gRPC message, then the largest request of all: both
// Secrets full of bytes JSON escapes to six, about 24 MiB on the wire, received whole and refused before it is
// decoded) inside the container with the
// documented limit and no swap: the kernel's cgroup enforces it, the limit is never reached, and the sidecar
// is not OOM-killed. The binary's own pages are dropped from the page cache
// before the start, so every page it maps is charged to this container (the worst case: the first
// sidecar on a node after the image was pulled).
func TestContainer_LargestLegalInputs_StayWithinTheDocumentedMemoryLimit(t *testing.T) {
	requireEngine(t)
	harness.LockHooksRoot(t)
	p := newPod(t, "mem")
	ifaces := bench.Ifaces(bench.LargestNICs, bench.BaseNAD)
	ann, err := bench.Annotations(ifaces, bench.LargestAnnotations)
	require.NoError(t, err)
	require.NoError(t, p.WritePodInfo(map[string]string{"app": "largest"}, ann))
	netInfo, err := bench.NetworkInfoJSON(ifaces)
	require.NoError(t, err)
	require.NoError(t, p.WriteDeviceInfo(netInfo))

	sc := startContainer(t, p, []string{"--memory", documentedLimitArg, "--memory-swap", documentedLimitArg}, dropCachedBinary(t))
	pid := pm.state(t, sc.name).Pid
	require.NotZero(t, pid)
	cg, err := memCgroupOf(pid)
	require.NoError(t, err)
	before, err := cg.figures()
	require.NoError(t, err)
	// How this host's enforcement is checked: the container's own cgroup carries the limit.
	require.Equal(t, int64(documentedLimit), before.LimitBytes, "the limit is in the container's cgroup %s", cg.dir)
	if cg.v2 {
		assert.Equal(t, int64(0), before.SwapLimitBytes, "memory-swap equal to memory: no swap (v2 memory.swap.max)")
	} else if before.SwapLimitBytes >= 0 {
		assert.Equal(t, int64(documentedLimit), before.SwapLimitBytes, "memory+swap equal to memory: no swap")
	} else {
		t.Logf("no memory.memsw.limit_in_bytes in %s (kernel without swap accounting): the no-swap half is unenforced, "+
			"and this host has swap %s", cg.dir, swapTotal(t))
	}

	res, err := bench.MeasureLargest(p.Socket(), pid)
	for _, in := range res.Inputs {
		t.Logf("%-48s %8d bytes legal=%-5v accepted=%-5v %v peak RSS %d KiB %.80s", in.Name, in.Bytes, in.Legal, in.Accepted, in.Duration, in.PeakAfterKiB, in.Error)
	}
	require.NoError(t, err, "every legal input is answered, every other rejected, inside the limit")
	after, err := cg.figures()
	require.NoError(t, err)
	t.Logf("memory limit %d MiB: cgroup peak %.1f MiB (page cache included; %s), limit reached %d times, OOM kills %d; "+
		"bench peak RSS (VmHWM) %.1f MiB (%.1f MiB at ready, %.1f MiB before OnDefineDomain, domain %d bytes)",
		documentedLimit>>20, mib(after.PeakBytes), peakFile(cg), after.LimitHits, after.OOMKills,
		mib(res.PeakRSSKiB<<10), mib(res.ReadyPeakKiB<<10), mib(res.BeforeDomainKiB<<10), res.DomainBytes)
	lr := res.LargestRequest
	t.Logf("largest request inside the limit (%s, %d bytes before escaping): accepted=%v in %v, peak RSS %.1f MiB",
		lr.Name, lr.Bytes, lr.Accepted, lr.Duration, mib(lr.PeakAfterKiB<<10))
	require.False(t, lr.Accepted, "the largest request is received and refused inside the documented limit, not decoded")
	assert.Contains(t, lr.Error, "bytes the sidecar decodes")
	// The figures must have been read: -1 would make every bound below hold by itself.
	require.Positivef(t, after.PeakBytes, "the cgroup's %s was read", peakFile(cg))
	assert.LessOrEqual(t, after.PeakBytes, int64(bench.LegalPeakBytes), "the peak leaves the documented limit 15%% headroom (%d bytes)", bench.LegalPeakBytes)
	if after.LimitHits >= 0 {
		// Reached never: the kernel did not have to reclaim the sidecar's pages to keep it inside the limit.
		assert.Zero(t, after.LimitHits, "memory.failcnt: the limit was reached")
	} else {
		t.Logf("no memory.failcnt in %s (cgroup v2): whether the limit was reached is not counted", cg.dir)
	}
	if after.OOMKills >= 0 {
		assert.Zero(t, after.OOMKills, "no OOM kill in the container's cgroup")
	} else {
		t.Logf("this kernel counts no OOM kills per cgroup: podman inspect's OOMKilled below is the check")
	}

	assert.Equal(t, 0, sc.stop(t))
	assert.False(t, pm.state(t, sc.name).OOMKilled, "podman inspect: not OOM-killed")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func peakFile(cg memCgroup) string {
	if cg.v2 {
		return "memory.peak"
	}
	return "memory.max_usage_in_bytes"
}

func swapTotal(t *testing.T) string {
	data, err := os.ReadFile("/proc/meminfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "SwapTotal:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "SwapTotal:"))
		}
	}
	return "unknown"
}

// dropCachedBinary returns a prepare step for startContainer: it writes the container's copy of the binary
// back and drops it from the page cache (POSIX_FADV_DONTNEED), so that the sidecar's start reads it in
// again, charged to the container's memory cgroup.
func dropCachedBinary(t *testing.T) func(name string) {
	return func(name string) {
		t.Helper()
		out, err := pm.run("mount", name)
		require.NoError(t, err)
		root := strings.TrimSpace(out)
		defer func() {
			if _, err := pm.run("unmount", name); err != nil {
				t.Log(err)
			}
		}()
		f, err := os.Open(filepath.Join(root, "sriov-udn-binding"))
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Sync())
		// golang.org/x/sys/unix.Fadvise is this call; the syscall package has the number only.
		const fadvDontNeed = 4
		_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0)
		require.Zero(t, errno, "fadvise(DONTNEED) on %s", f.Name())
	}
}
