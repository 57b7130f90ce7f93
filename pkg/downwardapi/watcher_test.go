package downwardapi

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTimeout bounds every wait in these tests; a pass never comes near it.
const testTimeout = 10 * time.Second

// swapVolume mimics kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go): timestamped dir,
// ..data_tmp symlink renamed over ..data, user-visible symlinks, old dir removed. Unlike kubelet it
// swaps even when content is unchanged, which is what the content comparison must absorb.
func swapVolume(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	ts, err := os.MkdirTemp(dir, "..ts_")
	require.NoError(t, err)
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(ts, name), []byte(content), 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, dataLink)))
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			require.NoError(t, os.Symlink(filepath.Join(dataLink, name), link))
		}
	}
	if old != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, old)))
	}
}

func newTestWatcher(t *testing.T, cfg Config) *Watcher {
	t.Helper()
	w, err := NewWatcher(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, w.Close()) })
	return w
}

func waitFor(t *testing.T, w *Watcher, need func(*Snapshot) []Missing) *Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := w.Wait(ctx, need)
	require.NoError(t, err)
	return s
}

func needAnnotation(key, value string) func(*Snapshot) []Missing {
	return func(s *Snapshot) []Missing {
		if v, ok := s.Annotations[key]; !ok || v != value {
			return []Missing{{Source: AnnotationsFile, Field: key}}
		}
		return nil
	}
}

func needDeviceInfo(network string) func(*Snapshot) []Missing {
	return func(s *Snapshot) []Missing {
		if s.DeviceInfo != nil {
			for _, i := range s.DeviceInfo.Interfaces {
				if i.Network == network {
					return nil
				}
			}
		}
		return []Missing{{Network: network, Source: "device-info", Field: "deviceInfo"}}
	}
}

func TestNewWatcher_NothingConfigured_SnapshotEmptyAndWaitTimesOut(t *testing.T) {
	w := newTestWatcher(t, Config{})
	s := w.Snapshot()
	require.NotNil(t, s)
	assert.Equal(t, uint64(1), s.Generation)
	assert.False(t, s.PodInfo)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := w.Wait(ctx, needDeviceInfo("net1"))
	var me *MissingError
	require.ErrorAs(t, err, &me)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, []Missing{{Network: "net1", Source: "device-info", Field: "deviceInfo"}}, me.Items)
}

func TestNewWatcher_ReadsExistingVolumeSynchronously(t *testing.T) {
	dir := t.TempDir()
	swapVolume(t, dir, map[string]string{LabelsFile: `app="vm"`, AnnotationsFile: formatMap(map[string]string{"a": "1"})})
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	s := w.Snapshot()
	assert.True(t, s.PodInfo)
	assert.Equal(t, map[string]string{"app": "vm"}, s.Labels)
	assert.Equal(t, map[string]string{"a": "1"}, s.Annotations)
}

func TestWatcher_DeviceInfoEmptyThenWritten_WaitReturns(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "podinfo")
	require.NoError(t, os.Mkdir(vol, 0o755))
	swapVolume(t, vol, map[string]string{"network-info": ""})
	w := newTestWatcher(t, Config{DeviceInfoFile: filepath.Join(vol, "network-info")})
	assert.Nil(t, w.Snapshot().DeviceInfo, "an empty file means not yet")
	assert.Empty(t, w.Snapshot().Problems)

	done := make(chan *Snapshot)
	go func() {
		s, _ := w.Wait(context.Background(), needDeviceInfo("sriov-vfio"))
		done <- s
	}()
	swapVolume(t, vol, map[string]string{"network-info": networkInfoExample})
	select {
	case s := <-done:
		require.NotNil(t, s)
		assert.Equal(t, "0000:c4:02.5", s.DeviceInfo.Interfaces[0].DeviceInfo.Pci.PciAddress)
	case <-time.After(testTimeout):
		t.Fatal("Wait did not return after the swap")
	}
}

func TestWatcher_DirectoryCreatedLater_WatchMovesDown(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "podinfo")
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	assert.False(t, w.Snapshot().PodInfo, "absent volume: source unavailable, not an error")
	assert.Empty(t, w.Snapshot().Problems)

	require.NoError(t, os.MkdirAll(dir, 0o755))
	swapVolume(t, dir, map[string]string{LabelsFile: "", AnnotationsFile: `k="v"`})
	s := waitFor(t, w, needAnnotation("k", "v"))
	assert.True(t, s.PodInfo)

	swapVolume(t, dir, map[string]string{LabelsFile: "", AnnotationsFile: `k="v2"`})
	waitFor(t, w, needAnnotation("k", "v2"))
}

func TestWatcher_DirectoryRemovedAndRecreated_SourceGoesAndComesBack(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "podinfo")
	require.NoError(t, os.Mkdir(dir, 0o755))
	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="1"`})
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	require.True(t, w.Snapshot().PodInfo)

	require.NoError(t, os.RemoveAll(dir))
	waitFor(t, w, func(s *Snapshot) []Missing {
		if s.PodInfo {
			return []Missing{{Source: dir, Field: "removal"}}
		}
		return nil
	})

	require.NoError(t, os.Mkdir(dir, 0o755))
	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="2"`})
	waitFor(t, w, needAnnotation("k", "2"))
}

func TestWatcher_PlainFileWrites_Noticed(t *testing.T) {
	dir := t.TempDir()
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	require.NoError(t, os.WriteFile(filepath.Join(dir, AnnotationsFile), []byte(`k="plain"`), 0o644))
	waitFor(t, w, needAnnotation("k", "plain"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, AnnotationsFile), []byte(`k="plain2"`), 0o644))
	waitFor(t, w, needAnnotation("k", "plain2"))
}

func TestWatcher_UnchangedSwap_PublishesNothing(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{LabelsFile: `l="1"`, AnnotationsFile: `k="1"`}
	swapVolume(t, dir, files)
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	gen := w.Snapshot().Generation

	for range 5 {
		swapVolume(t, dir, files) // same bytes, new timestamped dir
	}
	swapVolume(t, dir, map[string]string{LabelsFile: `l="1"`, AnnotationsFile: `k="2"`})
	s := waitFor(t, w, needAnnotation("k", "2"))
	// Events are handled in order, so the five identical swaps were seen before this one.
	assert.Equal(t, gen+1, s.Generation, "only the real change published a snapshot")
}

func TestWatcher_SwapsAndDeviceInfoInSameDirectory_BothSourcesTracked(t *testing.T) {
	dir := t.TempDir()
	w := newTestWatcher(t, Config{PodInfoDir: dir, DeviceInfoFile: filepath.Join(dir, "network-info")})
	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="v"`, "network-info": networkInfoExample})
	waitFor(t, w, func(s *Snapshot) []Missing {
		return append(needAnnotation("k", "v")(s), needDeviceInfo("sriov-vfio")(s)...)
	})
}

func TestWatcher_BadContent_ReportedAsProblemNamingFileAnnotationAndField(t *testing.T) {
	dir := t.TempDir()
	devDir := t.TempDir()
	swapVolume(t, dir, map[string]string{AnnotationsFile: formatMap(map[string]string{
		PodNetworksAnnotation: `{"ns/a":{"mac_address":"02:00:00:00:00:01","ip_addresses":["10.0.0.5"]}}`,
	})})
	swapVolume(t, devDir, map[string]string{"network-info": `{"interfaces":[{"network":"n","mac":"bad"}]}`})
	w := newTestWatcher(t, Config{PodInfoDir: dir, DeviceInfoFile: filepath.Join(devDir, "network-info")})

	s := w.Snapshot()
	require.Len(t, s.Problems, 2)
	msgs := s.Problems[0].Error() + "\n" + s.Problems[1].Error()
	assert.Contains(t, msgs, filepath.Join(devDir, "network-info")+`: network "n": field interfaces[0].mac`)
	assert.Contains(t, msgs, "pod-info file "+filepath.Join(dir, AnnotationsFile)+`: k8s.ovn.org/pod-networks: network "ns/a": field ip_addresses[0]`)
	assert.Nil(t, s.DeviceInfo)
	assert.Nil(t, s.PodNetworks)
	assert.NotNil(t, s.Annotations, "the other annotations stay usable")

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := w.Wait(ctx, needDeviceInfo("n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "problem: device-info file:", "the timeout error carries the reason")
}

func TestWatcher_FileOverMaxFileSize_ProblemNamesPath(t *testing.T) {
	dir := t.TempDir()
	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="` + strings.Repeat("x", MaxFileSize) + `"`})
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	s := w.Snapshot()
	require.Len(t, s.Problems, 1)
	assert.ErrorContains(t, s.Problems[0], filepath.Join(dir, AnnotationsFile)+": larger than 1048576 bytes")
	assert.True(t, s.PodInfo)
	assert.Nil(t, s.Annotations)
}

func TestWatcher_NonRegularFile_ProblemNotHang(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, AnnotationsFile), 0o755))
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	require.Len(t, w.Snapshot().Problems, 1)
	assert.ErrorContains(t, w.Snapshot().Problems[0], "not a regular file")
}

func TestWatcher_Close_UnblocksWaitAndNextAndIsIdempotent(t *testing.T) {
	w, err := NewWatcher(Config{PodInfoDir: t.TempDir()})
	require.NoError(t, err)
	waitErr := make(chan error, 2)
	go func() {
		_, err := w.Wait(context.Background(), needAnnotation("never", "x"))
		waitErr <- err
	}()
	go func() {
		_, err := w.Next(context.Background(), w.Snapshot().Generation)
		waitErr <- err
	}()
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	for range 2 {
		select {
		case err := <-waitErr:
			assert.ErrorIs(t, err, ErrClosed)
		case <-time.After(testTimeout):
			t.Fatal("Close did not unblock a waiter")
		}
	}
}

func TestWatcher_Next_ReturnsEachNewGeneration(t *testing.T) {
	dir := t.TempDir()
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	s, err := w.Next(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), s.Generation, "the initial snapshot counts as new to a fresh loop")

	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="1"`})
	s2, err := w.Next(ctx, s.Generation)
	require.NoError(t, err)
	assert.Greater(t, s2.Generation, s.Generation)

	short, cancelShort := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelShort()
	_, err = w.Next(short, w.Snapshot().Generation)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestWatcher_SnapshotsAreImmutable(t *testing.T) {
	dir := t.TempDir()
	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="1"`})
	w := newTestWatcher(t, Config{PodInfoDir: dir})
	first := w.Snapshot()
	swapVolume(t, dir, map[string]string{AnnotationsFile: `k="2"`})
	waitFor(t, w, needAnnotation("k", "2"))
	assert.Equal(t, "1", first.Annotations["k"], "an old snapshot keeps its content")
}

func TestWatcherRoute_OnlyDataLinkAndWatchedFilesMarkSourceDirty(t *testing.T) {
	dir := t.TempDir()
	fsw, err := fsnotify.NewWatcher()
	require.NoError(t, err)
	defer func() { assert.NoError(t, fsw.Close()) }()
	s := &source{name: "pod-info", dir: dir, files: []string{LabelsFile, AnnotationsFile}, watchPoint: dir}
	w := &Watcher{log: slog.New(slog.DiscardHandler), fsw: fsw, sources: []*source{s}, watched: map[string]bool{}}

	tests := []struct {
		name  string
		event fsnotify.Event
		dirty bool
	}{
		{"..data renamed into place", fsnotify.Event{Name: filepath.Join(dir, "..data"), Op: fsnotify.Create}, true},
		{"..data reported as Write", fsnotify.Event{Name: filepath.Join(dir, "..data"), Op: fsnotify.Write}, true},
		{"..data removed", fsnotify.Event{Name: filepath.Join(dir, "..data"), Op: fsnotify.Remove}, true},
		{"plain write of a watched file", fsnotify.Event{Name: filepath.Join(dir, AnnotationsFile), Op: fsnotify.Write}, true},
		{"user-visible symlink created", fsnotify.Event{Name: filepath.Join(dir, LabelsFile), Op: fsnotify.Create}, true},
		{"chmod of a watched file (mode fixed in place)", fsnotify.Event{Name: filepath.Join(dir, LabelsFile), Op: fsnotify.Chmod}, true},
		{"chmod of the directory itself", fsnotify.Event{Name: dir, Op: fsnotify.Chmod}, true},
		{"chmod of an unrelated file", fsnotify.Event{Name: filepath.Join(dir, "other"), Op: fsnotify.Chmod}, false},
		{"..data_tmp", fsnotify.Event{Name: filepath.Join(dir, "..data_tmp"), Op: fsnotify.Create}, false},
		{"timestamped dir", fsnotify.Event{Name: filepath.Join(dir, "..2026_11_29_18_00_00.123"), Op: fsnotify.Create}, false},
		{"unrelated file", fsnotify.Event{Name: filepath.Join(dir, "other"), Op: fsnotify.Write}, false},
		{"file in another directory", fsnotify.Event{Name: filepath.Join(dir+"x", AnnotationsFile), Op: fsnotify.Write}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.dirty, len(w.route(tt.event)) == 1)
			assert.Equal(t, dir, s.watchPoint, "no watch movement for events inside the directory")
		})
	}
}
