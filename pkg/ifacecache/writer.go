package ifacecache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

const (
	dirPerm  fs.FileMode = 0o750
	filePerm fs.FileMode = 0o640
	// Temp files are named "." + name + tempSuffix + random. No valid interface name starts with
	// '.', so a temp file is never mistaken for an entry and KubeVirt's reader never opens one.
	tempSuffix = ".tmp-"
)

// Writer keeps <Dir>/<vmi-uid>/ holding exactly one KubeVirt PodIfaceCacheData file per bound
// interface with a known address. It is safe for concurrent use; Sync calls are serialised.
type Writer struct {
	dir    string
	fs     FileSystem
	logger *slog.Logger

	mu sync.Mutex
	// written remembers the bytes of each file this Writer wrote or verified, keyed by path, so an
	// unchanged Sync costs one ReadDir and no reads or writes.
	written map[string][]byte
}

// SyncResult says what one Sync changed, by interface name.
type SyncResult struct {
	Written   []string // created or rewritten
	Removed   []string // stale entries (interfaces that disappeared) and leftover temp files
	Unchanged []string // already up to date: not touched
}

// NewWriter returns a Writer rooted at dir (the --iface-cache-dir flag) on the real file system.
func NewWriter(dir string, logger *slog.Logger) *Writer {
	return NewWriterWithFS(dir, OSFileSystem{}, logger)
}

// NewWriterWithFS is NewWriter with an injected FileSystem.
func NewWriterWithFS(dir string, fsys FileSystem, logger *slog.Logger) *Writer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{dir: dir, fs: fsys, logger: logger, written: map[string][]byte{}}
}

// Dir is the directory the Writer is rooted at.
func (w *Writer) Dir() string { return w.dir }

// Sync makes <Dir>/<vmiUID>/ hold exactly the entries BuildEntries decides for bound: it writes new
// and changed entries atomically (temp file, fsync, rename, directory fsync; files 0640, directories
// 0750), leaves identical ones untouched, and removes every other file there (interfaces that
// disappeared, temp files left by a crash). It is idempotent; call it again whenever the VMI or the
// annotations change (hotplug, IP change).
//
// An invalid VMI UID stops Sync before any I/O. An invalid interface name is reported in the
// returned error while the valid interfaces are still synced; so is a failed write. The result
// lists what was done even when err is not nil.
func (w *Writer) Sync(vmiUID string, specIfaces []model.Interface, bound []model.BoundInterface, primary model.Family) (SyncResult, error) {
	var res SyncResult
	if err := ValidateName("vmi uid", vmiUID); err != nil {
		return res, fmt.Errorf("sync interface cache: %w", err)
	}
	entries, buildErr := BuildEntries(specIfaces, bound, primary)
	errs := []error{buildErr}

	w.mu.Lock()
	defer w.mu.Unlock()

	vmiDir := filepath.Join(w.dir, vmiUID)
	onDisk, err := w.listDir(vmiDir)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}

	want := make(map[string]bool, len(entries))
	for _, e := range entries {
		want[e.Name] = true
		path := filepath.Join(vmiDir, e.Name)
		data, err := e.Encode()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if onDisk[e.Name] && w.upToDate(path, data) {
			res.Unchanged = append(res.Unchanged, e.Name)
			continue
		}
		if err := w.writeAtomic(vmiDir, e.Name, data); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Written = append(res.Written, e.Name)
		w.logger.Info("interface cache entry written", "vmiUID", vmiUID, "interface", e.Name, "podIPs", e.Data.PodIPs)
	}

	for _, name := range sortedKeys(onDisk) {
		if want[name] {
			continue
		}
		path := filepath.Join(vmiDir, name)
		if err := w.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale interface cache entry %q: %w", path, err))
			continue
		}
		delete(w.written, path)
		res.Removed = append(res.Removed, name)
		w.logger.Info("interface cache entry removed", "vmiUID", vmiUID, "file", name)
	}
	return res, errors.Join(errs...)
}

// listDir returns the names of the non-directory entries of dir; a missing dir is empty.
func (w *Writer) listDir(dir string) (map[string]bool, error) {
	des, err := w.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list interface cache directory %q: %w", dir, err)
	}
	names := make(map[string]bool, len(des))
	for _, de := range des {
		if de.IsDir() {
			// Not ours to remove: nothing in this package creates directories below a VMI's.
			continue
		}
		names[de.Name()] = true
	}
	return names, nil
}

// upToDate reports whether path already holds data: from memory when this Writer wrote or checked
// it, else by reading it (the first Sync after a start finds files of an earlier run).
func (w *Writer) upToDate(path string, data []byte) bool {
	if prev, ok := w.written[path]; ok {
		return bytes.Equal(prev, data)
	}
	cur, err := w.fs.ReadFile(path)
	if err != nil || !bytes.Equal(cur, data) {
		return false
	}
	w.written[path] = data
	return true
}

// writeAtomic replaces dir/name with data so that a reader sees either the old or the new content,
// never a prefix: the data goes to a temp file in the same directory, is fsynced, then renamed
// over the entry. A failure at any step removes the temp file and leaves the entry as it was.
func (w *Writer) writeAtomic(dir, name string, data []byte) (err error) {
	path := filepath.Join(dir, name)
	if err := w.ensureDir(dir); err != nil {
		return err
	}
	tmp, err := w.fs.CreateTemp(dir, "."+name+tempSuffix+"*")
	if err != nil {
		return fmt.Errorf("create temp file for interface cache entry %q: %w", path, err)
	}
	tmpName := tmp.Name()
	closed, renamed := false, false
	defer func() {
		if err == nil || renamed {
			return
		}
		if !closed {
			_ = tmp.Close() // the write already failed; this error adds nothing
		}
		if rmErr := w.fs.Remove(tmpName); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			// Left for the next Sync, which removes every non-entry file.
			w.logger.Warn("temp file not removed", "file", tmpName, "error", rmErr)
		}
	}()

	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write temp file %q for interface cache entry %q: %w", tmpName, path, err)
	}
	if err := tmp.Chmod(filePerm); err != nil {
		return fmt.Errorf("chmod temp file %q for interface cache entry %q: %w", tmpName, path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync temp file %q for interface cache entry %q: %w", tmpName, path, err)
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp file %q for interface cache entry %q: %w", tmpName, path, err)
	}
	if err := w.fs.Rename(tmpName, path); err != nil {
		return fmt.Errorf("rename %q to interface cache entry %q: %w", tmpName, path, err)
	}
	// The entry is in place: from here on a failure must not delete anything, and memory must
	// reflect the new content whatever the directory fsync says.
	renamed = true
	w.written[path] = data
	if err := w.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync interface cache directory %q after writing %q: %w", dir, name, err)
	}
	return nil
}

// ensureDir creates the VMI directory with mode 0750 regardless of the umask.
func (w *Writer) ensureDir(dir string) error {
	if err := w.fs.MkdirAll(dir, dirPerm); err != nil {
		return fmt.Errorf("create interface cache directory %q: %w", dir, err)
	}
	if err := w.fs.Chmod(dir, dirPerm); err != nil {
		return fmt.Errorf("chmod interface cache directory %q: %w", dir, err)
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
