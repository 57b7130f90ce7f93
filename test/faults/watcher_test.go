package faults

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/kubernetes/pkg/fieldpath"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// podInfoLoaded matches the watcher's line for a snapshot that holds annotations.
func podInfoLoaded(l map[string]any) bool {
	n, _ := l["annotations"].(float64)
	return l["msg"] == "downwardapi: snapshot published" && n > 0
}

// plainPodInfo writes the annotations file straight into dir (no kubelet ..data layout).
func plainPodInfo(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "annotations")
	raw := fieldpath.FormatMap(loadSamples(t).annotations)
	require.NoError(t, os.WriteFile(path, []byte(raw), 0o644))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

func startAsPodUser(t *testing.T, l *harness.Pod) *harness.Process {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: the unreadable-file cases need the sidecar to run as uid 107 while the test (root) owns the files (CI runs as root)")
	}
	chownTree(t, l.HooksDir)
	return harness.StartWith(t, asPodUser, sidecarBin, args(l)...)
}

// Case 8: a pod-info dir unreadable at start is picked up once it becomes readable.
func TestWatcher_PodInfoDirUnreadableAtStart_RecoversWhenMadeReadable(t *testing.T) {
	l := newLayout(t)
	plainPodInfo(t, l.PodInfoDir, 0o644)
	require.NoError(t, os.Chmod(l.PodInfoDir, 0o000))
	proc := startAsPodUser(t, l)

	require.NoError(t, os.Chmod(l.PodInfoDir, 0o755))
	_, err := proc.WaitLog(podInfoLoaded, logWait)
	require.NoError(t, err, "the annotations were never read after the dir became readable")
}

// Case 8: an in-place chmod that makes a mode-000 file readable is noticed.
func TestWatcher_AnnotationsFileChmoddedReadable_Reread(t *testing.T) {
	l := newLayout(t)
	path := plainPodInfo(t, l.PodInfoDir, 0o000)
	proc := startAsPodUser(t, l)

	require.NoError(t, os.Chmod(path, 0o644))
	_, err := proc.WaitLog(podInfoLoaded, logWait)
	require.NoError(t, err, "the chmod was not noticed")
}
