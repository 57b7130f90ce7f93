package ifacecache

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

const testUID = "0b3c8e5e-6f3a-4c8e-9a52-2f4b6c1d9e7f"

// recordingFS is the real file system with counters and optional failures injected per operation.
type recordingFS struct {
	creates, renames, removes, reads int

	failAt string // "create", "write", "chmod", "sync", "close", "rename", "syncdir"
	// died simulates a process killed mid-write: the temp file gets half the bytes and nothing
	// runs afterwards, so the cleanup Remove of the temp file fails too.
	died bool
	// afterOpen, when set, runs once Sync has opened and checked the VMI directory: an attacker's move mid-Sync.
	afterOpen func()
}

var errInjected = errors.New("injected failure")

// writer is a Writer on root whose directories are recorded by r.
func (r *recordingFS) writer(root string) *Writer {
	w := NewWriter(root, nil)
	w.open = func(root, name string, create bool) (cacheDir, error) {
		d, err := openDir(root, name, create)
		if err != nil {
			return nil, err
		}
		if r.afterOpen != nil {
			r.afterOpen()
		}
		return &recordingDir{cacheDir: d, fs: r}, nil
	}
	return w
}

type recordingDir struct {
	cacheDir
	fs *recordingFS
}

func (d *recordingDir) CreateTemp(prefix string) (tempFile, error) {
	d.fs.creates++
	if d.fs.failAt == "create" {
		return nil, errInjected
	}
	f, err := d.cacheDir.CreateTemp(prefix)
	if err != nil {
		return nil, err
	}
	return &faultyFile{tempFile: f, fs: d.fs}, nil
}

func (d *recordingDir) ReadFile(name string, limit int64) ([]byte, error) {
	d.fs.reads++
	return d.cacheDir.ReadFile(name, limit)
}

func (d *recordingDir) Rename(oldName, newName string) error {
	d.fs.renames++
	if d.fs.failAt == "rename" {
		return errInjected
	}
	return d.cacheDir.Rename(oldName, newName)
}

func (d *recordingDir) Remove(name string) error {
	d.fs.removes++
	if d.fs.died {
		return errInjected
	}
	return d.cacheDir.Remove(name)
}

func (d *recordingDir) Sync() error {
	if d.fs.failAt == "syncdir" {
		return errInjected
	}
	return d.cacheDir.Sync()
}

type faultyFile struct {
	tempFile
	fs *recordingFS
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if f.fs.failAt == "write" {
		n, _ := f.tempFile.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.tempFile.Write(p)
}

func (f *faultyFile) Chmod(mode fs.FileMode) error {
	if f.fs.failAt == "chmod" {
		return errInjected
	}
	return f.tempFile.Chmod(mode)
}

func (f *faultyFile) Sync() error {
	if f.fs.failAt == "sync" {
		return errInjected
	}
	return f.tempFile.Sync()
}

func (f *faultyFile) Close() error {
	err := f.tempFile.Close()
	if f.fs.failAt == "close" {
		return errInjected
	}
	return err
}

func readEntry(t *testing.T, path string) PodIfaceCacheData {
	t.Helper()
	buf, err := os.ReadFile(path)
	require.NoError(t, err)
	var d PodIfaceCacheData
	require.NoError(t, json.Unmarshal(buf, &d), "entry %s must be whole JSON", path)
	if d.Iface != nil { // the file is indented like KubeVirt's; compare the iface compacted
		var c bytes.Buffer
		require.NoError(t, json.Compact(&c, d.Iface))
		d.Iface = c.Bytes()
	}
	return d
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestSync_WritesOneKubeVirtEntryPerInterfaceWithPermissions(t *testing.T) {
	dir := t.TempDir()
	w := NewWriter(dir, nil)
	kvSpec := []kvv1.Interface{{Name: "net1", Binding: &kvv1.PluginBinding{Name: "sriov-udn"}}}
	spec := specs(t, kvSpec...)

	res, err := w.Sync(testUID, spec, []model.BoundInterface{
		bound("net1", "fd00:10:66::77/64", "10.66.10.77/24"),
		bound("net2", "fd00:20::5/64"),
		{Name: "net3", DHCP: true}, // no address: no entry
	}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1", "net2"}, res.Written)
	assert.Empty(t, res.Removed)

	vmiDir := filepath.Join(dir, testUID)
	assert.Equal(t, []string{"net1", "net2"}, dirNames(t, vmiDir), "no temp file left, nothing for net3")
	assert.Equal(t, PodIfaceCacheData{Iface: mustJSON(t, kvSpec[0]), PodIP: "10.66.10.77", PodIPs: []string{"10.66.10.77", "fd00:10:66::77"}},
		readEntry(t, filepath.Join(vmiDir, "net1")))
	assert.Equal(t, PodIfaceCacheData{Iface: mustJSON(t, kvv1.Interface{Name: "net2"}), PodIP: "fd00:20::5", PodIPs: []string{"fd00:20::5"}},
		readEntry(t, filepath.Join(vmiDir, "net2")))

	st, err := os.Stat(vmiDir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o750), st.Mode().Perm())
	st, err = os.Stat(filepath.Join(vmiDir, "net1"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o640), st.Mode().Perm())
}

func TestSync_UnchangedInput_DoesNoWritesOrReads(t *testing.T) {
	rec := &recordingFS{}
	w := rec.writer(t.TempDir())
	ifaces := []model.BoundInterface{bound("net1", "10.0.0.1/8"), bound("net2", "10.0.0.2/8")}
	_, err := w.Sync(testUID, nil, ifaces, model.IPv4)
	require.NoError(t, err)
	require.Equal(t, 2, rec.creates)

	res, err := w.Sync(testUID, nil, ifaces, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1", "net2"}, res.Unchanged)
	assert.Empty(t, res.Written)
	assert.Equal(t, 2, rec.creates, "no new temp file")
	assert.Equal(t, 2, rec.renames, "no new rename")
	assert.Zero(t, rec.reads, "content known from memory")
}

func TestSync_RestartedWriter_LeavesIdenticalFilesAlone(t *testing.T) {
	dir := t.TempDir()
	ifaces := []model.BoundInterface{bound("net1", "10.0.0.1/8")}
	_, err := NewWriter(dir, nil).Sync(testUID, nil, ifaces, model.IPv4)
	require.NoError(t, err)

	rec := &recordingFS{}
	res, err := rec.writer(dir).Sync(testUID, nil, ifaces, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Unchanged)
	assert.Zero(t, rec.creates)
	assert.Equal(t, 1, rec.reads, "compared once against the file of the earlier run")
}

func TestSync_FollowsChanges_IPChangeHotplugAndUnplug(t *testing.T) {
	dir := t.TempDir()
	w := NewWriter(dir, nil)
	vmiDir := filepath.Join(dir, testUID)

	_, err := w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
	require.NoError(t, err)

	// IP change on net1, net2 hotplugged.
	res, err := w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.9/8"), bound("net2", "10.1.0.1/16")}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1", "net2"}, res.Written)
	assert.Equal(t, "10.0.0.9", readEntry(t, filepath.Join(vmiDir, "net1")).PodIP)

	// net1 unplugged: its entry goes. net2 loses its address (DHCP now, or the annotation vanished
	// for a moment): its last good entry stays while the VMI has the interface.
	res, err = w.Sync(testUID, nil, []model.BoundInterface{{Name: "net2", DHCP: true}}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Removed)
	assert.Equal(t, []string{"net2"}, dirNames(t, vmiDir))
	assert.Equal(t, "10.1.0.1", readEntry(t, filepath.Join(vmiDir, "net2")).PodIP)

	// Plugged back with the old content: written again although memory once held it.
	res, err = w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.9/8")}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Written)
}

func TestSync_DHCPModeLease_EntryWrittenWhenItArrivesRewrittenWhenItChanges(t *testing.T) {
	// pod-networks ipam_mode "dhcp" (OKEP-6224): the entry is MAC-only until ovnkube-node reports the lease,
	// and a sandbox recreated before the pod runs takes a new one. dhcp(lease) is the bound interface the
	// model derives at each step; the refresher syncs on every such change.
	dhcp := func(addrs ...string) []model.BoundInterface {
		b := bound("net1", addrs...)
		b.DHCP = true
		return []model.BoundInterface{b}
	}
	dir := t.TempDir()
	w := NewWriter(dir, nil)
	entry := filepath.Join(dir, testUID, "net1")

	res, err := w.Sync(testUID, nil, dhcp(), model.IPv4)
	require.NoError(t, err)
	assert.Empty(t, res.Written, "MAC-only: nothing to report")
	assert.NoFileExists(t, entry)

	res, err = w.Sync(testUID, nil, dhcp("10.1.192.213/24"), model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Written, "the lease arrived")
	assert.Equal(t, []string{"10.1.192.213"}, readEntry(t, entry).PodIPs)

	res, err = w.Sync(testUID, nil, dhcp("10.1.192.99/24"), model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Written, "a new lease rewrites the entry")
	assert.Equal(t, PodIfaceCacheData{Iface: mustJSON(t, kvv1.Interface{Name: "net1"}), PodIP: "10.1.192.99", PodIPs: []string{"10.1.192.99"}}, readEntry(t, entry))

	res, err = w.Sync(testUID, nil, dhcp("10.1.192.99/24"), model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Unchanged, "the same lease again: no write")
}

func TestSync_FileDeletedBehindItsBack_IsRewritten(t *testing.T) {
	dir := t.TempDir()
	w := NewWriter(dir, nil)
	ifaces := []model.BoundInterface{bound("net1", "10.0.0.1/8")}
	_, err := w.Sync(testUID, nil, ifaces, model.IPv4)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, testUID, "net1")))

	res, err := w.Sync(testUID, nil, ifaces, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Written)
}

func TestSync_HostileVMIUID_RefusedBeforeAnyIO(t *testing.T) {
	for _, uid := range []string{"../x", "a/b", "", "..", strings.Repeat("u", 300)} {
		t.Run(uid[:min(len(uid), 10)], func(t *testing.T) {
			dir := t.TempDir()
			_, err := NewWriter(dir, nil).Sync(uid, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidName)
			assert.Contains(t, err.Error(), "vmi uid")
			assert.Empty(t, dirNames(t, dir), "nothing created")
			assert.NoFileExists(t, filepath.Join(filepath.Dir(dir), "x"))
		})
	}
}

func TestSync_HostileInterfaceNames_RefusedValidOnesWritten(t *testing.T) {
	dir := t.TempDir()
	parent := filepath.Dir(dir)
	res, err := NewWriter(dir, nil).Sync(testUID, nil, []model.BoundInterface{
		bound("../x", "10.0.0.1/8"),
		bound("a/b", "10.0.0.2/8"),
		bound("", "10.0.0.3/8"),
		bound(strings.Repeat("n", 300), "10.0.0.4/8"),
		bound("net1", "10.0.0.5/8"),
	}, model.IPv4)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidName)
	for _, want := range []string{`"../x"`, `"a/b"`, "interface name is empty", "300 bytes"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, []string{"net1"}, res.Written)
	assert.Equal(t, []string{"net1"}, dirNames(t, filepath.Join(dir, testUID)))
	assert.NoFileExists(t, filepath.Join(dir, "x"))
	assert.NoFileExists(t, filepath.Join(parent, "x"))
}

func TestSync_FailedWriteAtAnyStep_KeepsOldEntryAndLeavesNoTempFile(t *testing.T) {
	for _, step := range []string{"create", "write", "chmod", "sync", "close", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			vmiDir := filepath.Join(dir, testUID)
			_, err := NewWriter(dir, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
			require.NoError(t, err)
			before, err := os.ReadFile(filepath.Join(vmiDir, "net1"))
			require.NoError(t, err)

			rec := &recordingFS{failAt: step}
			res, err := rec.writer(dir).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.2/8")}, model.IPv4)
			require.Error(t, err)
			assert.ErrorIs(t, err, errInjected)
			assert.Contains(t, err.Error(), filepath.Join(vmiDir, "net1"), "error names the entry")
			assert.Empty(t, res.Written)

			after, err := os.ReadFile(filepath.Join(vmiDir, "net1"))
			require.NoError(t, err)
			assert.Equal(t, before, after, "old entry intact")
			assert.Equal(t, []string{"net1"}, dirNames(t, vmiDir), "no temp file left")
		})
	}
}

func TestSync_ProcessKilledMidWrite_NoTornEntryAndNextSyncCleansUp(t *testing.T) {
	dir := t.TempDir()
	vmiDir := filepath.Join(dir, testUID)
	_, err := NewWriter(dir, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
	require.NoError(t, err)

	// Half the bytes reach the temp file, then the "process" is gone: no cleanup runs.
	dying := &recordingFS{failAt: "write", died: true}
	_, err = dying.writer(dir).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.2/8")}, model.IPv4)
	require.Error(t, err)

	names := dirNames(t, vmiDir)
	require.Len(t, names, 2, "the torn temp file is left behind: %v", names)
	assert.Equal(t, "10.0.0.1", readEntry(t, filepath.Join(vmiDir, "net1")).PodIP, "the entry is whole and old")

	// The restarted writer finishes the job and removes the leftover.
	res, err := NewWriter(dir, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.2/8")}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Written)
	require.Len(t, res.Removed, 1)
	assert.True(t, strings.HasPrefix(res.Removed[0], ".net1.tmp-"), "removed %q", res.Removed[0])
	assert.Equal(t, []string{"net1"}, dirNames(t, vmiDir))
	assert.Equal(t, "10.0.0.2", readEntry(t, filepath.Join(vmiDir, "net1")).PodIP)
}

func TestSync_DirectoryFsyncFails_EntryInPlaceAndErrorReturned(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingFS{failAt: "syncdir"}
	w := rec.writer(dir)
	_, err := w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
	require.ErrorIs(t, err, errInjected)
	assert.Contains(t, err.Error(), "fsync interface cache directory")
	assert.Equal(t, "10.0.0.1", readEntry(t, filepath.Join(dir, testUID, "net1")).PodIP)

	rec.failAt = ""
	res, err := w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Unchanged)
}

func TestSync_LeavesSubdirectoriesAlone(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, testUID, "keep"), 0o750))
	_, err := NewWriter(dir, nil).Sync(testUID, nil, nil, model.IPv4)
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(dir, testUID, "keep"))
}

func TestSync_ConcurrentCallers_EndInOneConsistentState(t *testing.T) {
	dir := t.TempDir()
	w := NewWriter(dir, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ifaces := []model.BoundInterface{bound("net1", "10.0.0.1/8")}
			if i%2 == 1 {
				ifaces = append(ifaces, bound("net2", "10.0.0.2/8"))
			}
			_, err := w.Sync(testUID, nil, ifaces, model.IPv4)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	res, err := w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Unchanged)
	assert.Equal(t, []string{"net1"}, dirNames(t, filepath.Join(dir, testUID)), "no temp file left")
}

func BenchmarkSync_64InterfacesUnchanged(b *testing.B) {
	w := NewWriter(b.TempDir(), nil)
	ifaces := make([]model.BoundInterface, 64)
	for i := range ifaces {
		ifaces[i] = model.BoundInterface{
			Name:      "net" + string(rune('a'+i/26)) + string(rune('a'+i%26)),
			Addresses: prefixes("10.66.10.77/24", "fd00:10:66::77/64"),
		}
	}
	if _, err := w.Sync(testUID, nil, ifaces, model.IPv4); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := w.Sync(testUID, nil, ifaces, model.IPv4)
		if err != nil || len(res.Written) != 0 {
			b.Fatalf("unchanged Sync wrote %v (err %v)", res.Written, err)
		}
	}
}

func TestSync_VMIDirIsASymlink_RefusedAndTargetUntouched(t *testing.T) {
	for name, link := range map[string]string{"to parent": "..", "elsewhere": "../other"} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "cache")
			require.NoError(t, os.MkdirAll(root, 0o750))
			victim := filepath.Clean(filepath.Join(root, link))
			require.NoError(t, os.MkdirAll(victim, 0o755))
			require.NoError(t, os.Chmod(victim, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(victim, "important.conf"), []byte("keep"), 0o644))
			require.NoError(t, os.Symlink(link, filepath.Join(root, testUID)))
			before, err := os.Stat(victim)
			require.NoError(t, err)

			_, err = NewWriter(root, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
			require.ErrorIs(t, err, ErrNotOurDirectory)
			assert.Contains(t, err.Error(), filepath.Join(root, testUID))
			assert.FileExists(t, filepath.Join(victim, "important.conf"))
			assert.NoFileExists(t, filepath.Join(victim, "net1"))
			after, err := os.Stat(victim)
			require.NoError(t, err)
			assert.Equal(t, before.Mode(), after.Mode(), "target chmodded")
		})
	}
}

func TestSync_OddFilesAtEntryPath_ReplacedWithoutFollowingOrBlocking(t *testing.T) {
	for name, plant := range map[string]func(t *testing.T, path, outside string){
		"fifo": func(t *testing.T, path, _ string) { require.NoError(t, syscall.Mkfifo(path, 0o640)) },
		"oversized file": func(t *testing.T, path, _ string) {
			require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{' '}, MaxEntrySize+1), 0o640))
		},
		"symlink to a file outside": func(t *testing.T, path, outside string) { require.NoError(t, os.Symlink(outside, path)) },
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			outside := filepath.Join(t.TempDir(), "outside")
			require.NoError(t, os.WriteFile(outside, []byte("not ours"), 0o644))
			vmiDir := filepath.Join(root, testUID)
			require.NoError(t, os.MkdirAll(vmiDir, 0o750))
			plant(t, filepath.Join(vmiDir, "net1"), outside)

			res, err := NewWriter(root, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
			require.NoError(t, err)
			assert.Equal(t, []string{"net1"}, res.Written)
			st, err := os.Lstat(filepath.Join(vmiDir, "net1"))
			require.NoError(t, err)
			assert.True(t, st.Mode().IsRegular())
			assert.Equal(t, "10.0.0.1", readEntry(t, filepath.Join(vmiDir, "net1")).PodIP)
			raw, err := os.ReadFile(outside)
			require.NoError(t, err)
			assert.Equal(t, "not ours", string(raw))
		})
	}
}

func TestSync_CacheRootIsASymlink_RefusedAndTargetUntouched(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "hooks")
	require.NoError(t, os.MkdirAll(target, 0o755))
	root := filepath.Join(base, "ifacecache")
	require.NoError(t, os.Symlink("hooks", root))

	_, err := NewWriter(root, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8")}, model.IPv4)
	require.ErrorIs(t, err, ErrNotOurDirectory)
	assert.Empty(t, dirNames(t, target), "nothing created through the symlink")
}

// outsideDir makes a directory outside every cache root, holding files that a writer which escaped
// would change.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	for _, name := range []string{"net1", "net2"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("not ours: "+name), 0o644))
	}
	return dir
}

// assertUntouched checks that dir is as outsideDir made it.
func assertUntouched(t *testing.T, dir string) {
	t.Helper()
	assert.Equal(t, []string{"net1", "net2"}, dirNames(t, dir), "nothing created or removed outside the root")
	for _, name := range []string{"net1", "net2"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, "not ours: "+name, string(raw), "%s rewritten outside the root", name)
	}
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), st.Mode().Perm(), "chmodded outside the root")
}

func TestSync_VMIDirSwappedForSymlinkBetweenCalls_NoWriteEscapes(t *testing.T) {
	for _, tt := range []struct {
		name string
		// link returns the symlink's target and the directory it reaches.
		link func(t *testing.T, root string) (target, victim string)
	}{
		{"outside the root, absolute", func(t *testing.T, _ string) (string, string) {
			v := outsideDir(t)
			return v, v
		}},
		{"outside the root, relative", func(t *testing.T, root string) (string, string) {
			v := outsideDir(t)
			rel, err := filepath.Rel(root, v)
			require.NoError(t, err)
			return rel, v
		}},
		{"another directory inside the root, which os.Root alone would follow", func(t *testing.T, root string) (string, string) {
			v := filepath.Join(root, "other-vmi")
			require.NoError(t, os.Rename(outsideDir(t), v))
			return "other-vmi", v
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "cache")
			w := NewWriter(root, nil)
			_, err := w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8"), bound("net2", "10.0.0.2/8")}, model.IPv4)
			require.NoError(t, err)

			// The compute container moves the VMI's directory away and leaves a symlink in its place.
			require.NoError(t, os.Rename(filepath.Join(root, testUID), filepath.Join(root, "moved")))
			target, victim := tt.link(t, root)
			require.NoError(t, os.Symlink(target, filepath.Join(root, testUID)))

			// A changed net1 and an unplugged net2: an escaped writer would rewrite one and remove the other.
			_, err = w.Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.9/8")}, model.IPv4)
			require.ErrorIs(t, err, ErrNotOurDirectory)
			assert.Contains(t, err.Error(), filepath.Join(root, testUID))
			_, err = NewWriter(root, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.9/8")}, model.IPv4)
			require.ErrorIs(t, err, ErrNotOurDirectory, "a fresh writer (a restarted sidecar) refuses it too")
			assertUntouched(t, victim)
		})
	}
}

func TestSync_VMIDirSwappedForSymlinkMidSync_WritesStayInTheOpenedDirectory(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	outside := outsideDir(t)
	_, err := NewWriter(root, nil).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.1/8"), bound("net2", "10.0.0.2/8")}, model.IPv4)
	require.NoError(t, err)

	// Sync has opened and checked the directory; before it reads or writes anything the directory is
	// moved away and a symlink to the outside put in its place.
	moved := filepath.Join(root, "moved")
	rec := &recordingFS{afterOpen: sync.OnceFunc(func() {
		require.NoError(t, os.Rename(filepath.Join(root, testUID), moved))
		require.NoError(t, os.Symlink(outside, filepath.Join(root, testUID)))
	})}
	res, err := rec.writer(root).Sync(testUID, nil, []model.BoundInterface{bound("net1", "10.0.0.9/8")}, model.IPv4)
	require.NoError(t, err)
	assert.Equal(t, []string{"net1"}, res.Written)
	assert.Equal(t, []string{"net2"}, res.Removed)
	assertUntouched(t, outside)
	assert.Equal(t, []string{"net1"}, dirNames(t, moved), "the write and the removal went to the directory Sync opened")
	assert.Equal(t, "10.0.0.9", readEntry(t, filepath.Join(moved, "net1")).PodIP)
}
