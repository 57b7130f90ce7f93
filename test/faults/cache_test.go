package faults

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

const logWait = 15 * time.Second

// refreshed matches the refresher's line for one pass that wrote, kept or failed to write entries.
var refreshed = msgIs("interface cache updated", "interface cache not fully written", "interface cache checked", "interface cache not refreshed")

// boundSidecar starts a sidecar with the sample annotations projected by kubelet, after plant has
// prepared the cache, and makes the PreCloudInitIso call that tells it the VMI.
func boundSidecar(t *testing.T, plant func(l *harness.Pod, vmiDir string)) (*harness.Pod, *harness.Process, samples) {
	t.Helper()
	s := loadSamples(t)
	l := newLayout(t)
	kubeletPodInfo(t, l, s.annotations)
	if plant != nil {
		plant(l, filepath.Join(l.CacheDir, s.vmiUID))
	}
	proc := start(t, l)
	require.NoError(t, preCloudInitIso(t, l.Socket(), s.vmiJSON, noCloudJSON(t), 10*time.Second))
	return l, proc, s
}

func readEntry(t *testing.T, l *harness.Pod, s samples, iface string) string {
	t.Helper()
	path := filepath.Join(l.CacheDir, s.vmiUID, iface)
	st, err := os.Lstat(path)
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular(), "%s is %s, want a regular file", path, st.Mode().Type())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(raw)
}

// Case 5: a FIFO at an entry path must neither hang the refresher nor keep the process from exiting.
func TestCache_FIFOAtEntryPath_ReplacedAndProcessStillStops(t *testing.T) {
	l, proc, s := boundSidecar(t, func(_ *harness.Pod, vmiDir string) {
		require.NoError(t, os.MkdirAll(vmiDir, 0o750))
		require.NoError(t, syscall.Mkfifo(filepath.Join(vmiDir, "sriov-l2"), 0o640))
	})
	_, err := proc.WaitLog(msgIs("interface cache updated"), logWait)
	require.NoError(t, err, "the refresher is stuck on the FIFO")
	assert.Contains(t, readEntry(t, l, s, "sriov-l2"), `"192.168.50.7"`)

	require.NoError(t, proc.Signal(syscall.SIGTERM))
	code, err := proc.Wait(stopBound)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
}

// Case 6: <cache>/<uid> -> .. is the hooks mount itself in the default layout: following it
// deleted the socket. Nothing outside the cache's own directories may be written, chmodded or removed.
func TestCache_VMIDirSymlinkedToSocketDir_NothingThereTouched(t *testing.T) {
	l, proc, _ := boundSidecar(t, func(l *harness.Pod, vmiDir string) {
		require.NoError(t, os.WriteFile(filepath.Join(l.HooksDir, "important.conf"), []byte("keep"), 0o644))
		require.NoError(t, os.MkdirAll(l.CacheDir, 0o750))
		require.NoError(t, os.Symlink("..", vmiDir))
	})
	_, err := proc.WaitLog(refreshed, logWait)
	require.NoError(t, err)

	assert.NoError(t, callInfo(l.Socket(), 5*time.Second), "the socket must survive")
	assert.FileExists(t, filepath.Join(l.HooksDir, "important.conf"))
	assert.NoFileExists(t, filepath.Join(l.HooksDir, "sriov-l2"), "an entry was written through the symlink")
	st, err := os.Stat(l.HooksDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "the symlink's target was chmodded")
}

func TestCache_VMIDirSymlinkedElsewhere_TargetNeitherWrittenChmoddedNorEmptied(t *testing.T) {
	var other string
	_, proc, _ := boundSidecar(t, func(l *harness.Pod, vmiDir string) {
		other = filepath.Join(filepath.Dir(l.HooksDir), "other")
		require.NoError(t, os.MkdirAll(other, 0o755))
		require.NoError(t, os.Chmod(other, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(other, "important.conf"), []byte("keep"), 0o644))
		require.NoError(t, os.MkdirAll(l.CacheDir, 0o750))
		require.NoError(t, os.Symlink(other, vmiDir))
	})
	_, err := proc.WaitLog(refreshed, logWait)
	require.NoError(t, err)

	assert.FileExists(t, filepath.Join(other, "important.conf"))
	entries, err := os.ReadDir(other)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only important.conf may be there")
	st, err := os.Stat(other)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())
}

// Case 9: a huge file at an entry path is not read whole; it is replaced by the entry.
func TestCache_HugeFileAtEntryPath_ReadWithACapAndReplaced(t *testing.T) {
	l, proc, s := boundSidecar(t, func(_ *harness.Pod, vmiDir string) {
		require.NoError(t, os.MkdirAll(vmiDir, 0o750))
		f, err := os.Create(filepath.Join(vmiDir, "sriov-l2"))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(300<<20)) // sparse: costs no disk
		require.NoError(t, f.Close())
	})
	_, err := proc.WaitLog(msgIs("interface cache updated"), logWait)
	require.NoError(t, err)
	assert.Contains(t, readEntry(t, l, s, "sriov-l2"), `"192.168.50.7"`)
	peak := procStatusKiB(t, proc.Pid(), "VmHWM")
	t.Logf("peak RSS after replacing a 300 MiB entry: %d KiB", peak)
	assert.Less(t, peak, 64<<10, "peak RSS %d KiB: the 300 MiB file was read whole", peak)
}

// Case 10: entries are kept while the VMI runs, whatever happens to the data they came from.
func TestCache_AnnotationsLoseTheNetwork_EntriesKept(t *testing.T) {
	l, proc, s := boundSidecar(t, nil)
	_, err := proc.WaitLog(msgIs("interface cache updated"), logWait)
	require.NoError(t, err)
	before := readEntry(t, l, s, "sriov-l2")

	require.NoError(t, l.WritePodInfo(map[string]string{"kubevirt.io": "virt-launcher"},
		harness.Without(s.annotations, "k8s.v1.cni.cncf.io/network-status", "k8s.ovn.org/pod-networks")))
	_, err = proc.WaitLog(refreshed, logWait)
	require.NoError(t, err)
	assert.Equal(t, before, readEntry(t, l, s, "sriov-l2"))
	readEntry(t, l, s, "sriov-localnet")
}

func TestCache_PodInfoVolumeVanishes_EntriesKept(t *testing.T) {
	l, proc, s := boundSidecar(t, nil)
	_, err := proc.WaitLog(msgIs("interface cache updated"), logWait)
	require.NoError(t, err)
	before := readEntry(t, l, s, "sriov-l2")

	require.NoError(t, os.RemoveAll(l.PodInfoDir))
	_, err = proc.WaitLog(refreshed, logWait)
	require.NoError(t, err)
	assert.Equal(t, before, readEntry(t, l, s, "sriov-l2"))
	readEntry(t, l, s, "sriov-localnet")
}

// A failed write is retried with backoff, with no hook call and no data change; once everything is
// written the process is idle again (no timer left).
func TestCache_FailedWrite_RetriedWithoutAHookCallThenIdle(t *testing.T) {
	var blocker string
	l, proc, s := boundSidecar(t, func(_ *harness.Pod, vmiDir string) {
		blocker = filepath.Join(vmiDir, "sriov-l2")
		require.NoError(t, os.MkdirAll(filepath.Join(blocker, "sub"), 0o750)) // rename over a non-empty dir fails
	})
	_, err := proc.WaitLog(msgIs("interface cache not fully written"), logWait)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(blocker))

	_, err = proc.WaitLog(func(m map[string]any) bool {
		written, _ := m["written"].([]any)
		return m["msg"] == "interface cache updated" && slices.Contains(written, any("sriov-l2"))
	}, logWait)
	require.NoError(t, err, "the failed write was never retried")
	assert.Contains(t, readEntry(t, l, s, "sriov-l2"), `"192.168.50.7"`)

	before := cpuTicks(t, proc.Pid())
	time.Sleep(3 * time.Second) // a measurement window, not synchronisation
	assert.Equal(t, 0, cpuTicks(t, proc.Pid())-before, "CPU ticks while idle after the retry succeeded")
}
