package ifacecache

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
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
	// MaxEntrySize caps how much of an existing entry is read to compare it: ours are well under
	// 4 KiB (one interface spec and a few addresses); anything larger is not ours and is replaced.
	MaxEntrySize = 64 << 10
)

// Writer keeps <Dir>/<vmi-uid>/ holding exactly one KubeVirt PodIfaceCacheData file per bound
// interface with a known address. It is safe for concurrent use; Sync calls are serialised.
type Writer struct {
	dir    string
	open   func(root, name string, create bool) (cacheDir, error) // openDir; tests wrap it
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

// NewWriter returns a Writer rooted at dir (the --iface-cache-dir flag).
func NewWriter(dir string, logger *slog.Logger) *Writer {
	return &Writer{dir: dir, open: openDir, logger: cmp.Or(logger, slog.New(slog.DiscardHandler)), written: map[string][]byte{}}
}

// Sync makes <dir>/<vmiUID>/ hold the entries BuildEntries decides for bound: it writes new and
// changed entries atomically (temp file, fsync, rename, directory fsync; files 0640, directories
// 0750) and leaves identical ones untouched. It keeps the last good entry of every interface the VMI
// still has (in specIfaces or bound) even when its data is gone now: the cache feeds vmi.status, and
// data that vanishes for a moment must not make an IP flap. It removes only entries of interfaces the
// VMI no longer has (unplugged) and temp files left by a crash. It is idempotent; call it again
// whenever the VMI or the annotations change (hotplug, IP change).
//
// It works only inside a real directory <Dir>/<vmiUID> owned by this process's user (never through a
// symlink, at any level below Dir, nor outside Dir whatever is swapped in meanwhile), writes only
// regular files there, reads existing entries up to MaxEntrySize, and removes only names it listed as
// files (a directory swapped in for one at that moment goes only if it is empty).
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
	dir, err := w.open(w.dir, vmiUID, len(entries) > 0)
	if errors.Is(err, fs.ErrNotExist) {
		return res, errors.Join(errs...) // nothing to write and nothing there
	}
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("open interface cache directory %q: %w", vmiDir, err))...)
	}
	defer func() { _ = dir.Close() }()
	if len(entries) > 0 {
		if err := dir.Chmod(dirPerm); err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("chmod interface cache directory %q: %w", vmiDir, err))...)
		}
	}
	onDisk, err := listDir(dir)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}

	keep := make(map[string]bool, len(entries)+len(specIfaces)+len(bound))
	for _, s := range specIfaces {
		if s.State != model.InterfaceStateAbsent {
			keep[s.Name] = true
		}
	}
	for _, b := range bound {
		keep[b.Name] = true
	}
	for _, e := range entries { // entries are of bound interfaces: kept
		path := filepath.Join(vmiDir, e.Name)
		data, err := e.Encode()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if onDisk[e.Name] && w.upToDate(dir, e.Name, path, data) {
			res.Unchanged = append(res.Unchanged, e.Name)
			continue
		}
		if err := w.writeAtomic(dir, e.Name, data); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Written = append(res.Written, e.Name)
		w.logger.Info("interface cache entry written", "vmiUID", vmiUID, "interface", e.Name, "podIPs", e.Data.PodIPs)
	}

	for _, name := range slices.Sorted(maps.Keys(onDisk)) {
		if keep[name] {
			continue
		}
		path := filepath.Join(vmiDir, name)
		if err := dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale interface cache entry %q: %w", path, err))
			continue
		}
		delete(w.written, path)
		res.Removed = append(res.Removed, name)
		w.logger.Info("interface cache entry removed", "vmiUID", vmiUID, "file", name)
	}
	return res, errors.Join(errs...)
}

// listDir returns the names of the non-directory entries of dir.
func listDir(dir cacheDir) (map[string]bool, error) {
	des, err := dir.Entries()
	if err != nil {
		return nil, fmt.Errorf("list interface cache directory %q: %w", dir.Path(), err)
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

// upToDate reports whether name already holds data: from memory when this Writer wrote or checked
// it, else by reading it (the first Sync after a start finds files of an earlier run). Anything that
// is not a regular file of at most MaxEntrySize bytes is not up to date: it gets replaced.
func (w *Writer) upToDate(dir cacheDir, name, path string, data []byte) bool {
	if prev, ok := w.written[path]; ok {
		return bytes.Equal(prev, data)
	}
	cur, err := dir.ReadFile(name, MaxEntrySize)
	if err != nil || !bytes.Equal(cur, data) {
		return false
	}
	w.written[path] = data
	return true
}

// writeAtomic replaces dir/name with data so that a reader sees either the old or the new content,
// never a prefix: the data goes to a temp file in the same directory, is fsynced, then renamed
// over the entry. A failure at any step removes the temp file and leaves the entry as it was.
func (w *Writer) writeAtomic(dir cacheDir, name string, data []byte) (err error) {
	path := filepath.Join(dir.Path(), name)
	tmp, err := dir.CreateTemp("." + name + tempSuffix)
	if err != nil {
		return fmt.Errorf("create temp file for interface cache entry %q: %w", path, err)
	}
	tmpName := filepath.Base(tmp.Name())
	closed, renamed := false, false
	defer func() {
		if err == nil || renamed {
			return
		}
		if !closed {
			_ = tmp.Close() // the write already failed; this error adds nothing
		}
		if rmErr := dir.Remove(tmpName); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
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
	if err := dir.Rename(tmpName, name); err != nil {
		return fmt.Errorf("rename %q to interface cache entry %q: %w", tmpName, path, err)
	}
	// The entry is in place: from here on a failure must not delete anything, and memory must
	// reflect the new content whatever the directory fsync says.
	renamed = true
	w.written[path] = data
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("fsync interface cache directory %q after writing %q: %w", dir.Path(), name, err)
	}
	return nil
}
