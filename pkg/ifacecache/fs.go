package ifacecache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNotOurDirectory is returned for a cache root or VMI directory that is a symlink, not a
// directory, or (the VMI directory) owned by another user: the writer never works inside it.
var ErrNotOurDirectory = errors.New("not a directory this writer may use")

// cacheDir is one opened, verified VMI directory; names are entries directly in it. The real one is
// rootDir (an os.Root); tests wrap it to count operations and to fail (or "die") mid-write.
type cacheDir interface {
	Path() string // for messages
	Entries() ([]fs.DirEntry, error)
	// ReadFile reads name if it is a regular file of at most limit bytes, not through a symlink
	// and never blocking on a FIFO.
	ReadFile(name string, limit int64) ([]byte, error)
	// CreateTemp creates a new file named prefix + a unique suffix, mode 0600, never through a symlink.
	CreateTemp(prefix string) (tempFile, error)
	Rename(oldName, newName string) error // both names in this directory
	Remove(name string) error             // a symlink itself, never its target
	Chmod(perm fs.FileMode) error         // the directory's own mode
	Sync() error                          // so a rename in it survives a node crash
	Close() error
}

// tempFile is the part of *os.File that an atomic write uses.
type tempFile interface {
	Name() string
	Write(p []byte) (int, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// openDir opens <root>/<name> (creating both, with create, when missing; without it a missing one is
// an error satisfying errors.Is(err, fs.ErrNotExist)). Everything below root's parent is reached
// through os.Root, which never leaves the directory it was opened on. The root's parent is the
// operator's choice, so symlinks there are theirs; the root and the VMI directory sit in the hooks
// emptyDir, which the compute container can write, so neither may be a symlink: os.Root follows one
// that stays inside it, and <root>/<vmi-uid> pointing at another VMI's directory would.
func openDir(root, name string, create bool) (cacheDir, error) {
	root = filepath.Clean(root)
	if create {
		if err := os.MkdirAll(root, dirPerm); err != nil {
			return nil, err
		}
	}
	parent, err := os.OpenRoot(filepath.Dir(root))
	if err != nil {
		return nil, err
	}
	defer func() { _ = parent.Close() }()
	cache, _, err := openRealDir(parent, filepath.Base(root), root)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cache.Close() }()
	path := filepath.Join(root, name)
	if create {
		if err := cache.Mkdir(name, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	vmi, st, err := openRealDir(cache, name, path)
	if err != nil {
		return nil, err
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		_ = vmi.Close()
		return nil, fmt.Errorf("%s: %w (owned by uid %d, not %d)", path, ErrNotOurDirectory, uid, os.Geteuid())
	}
	return &rootDir{Root: vmi, path: path, mode: st.Mode().Perm()}, nil
}

// openRealDir opens parent/name if it is a real directory. It looks before it opens and compares
// after: a directory swapped for a symlink in between is a different file, and refused.
func openRealDir(parent *os.Root, name, path string) (*os.Root, fs.FileInfo, error) {
	lst, err := parent.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !lst.IsDir() {
		return nil, nil, fmt.Errorf("%s: %w (a symlink or not a directory)", path, ErrNotOurDirectory)
	}
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w (%w)", path, ErrNotOurDirectory, err)
	}
	st, err := r.Stat(".")
	if err == nil && !os.SameFile(lst, st) {
		err = fmt.Errorf("%s: %w (replaced while being opened)", path, ErrNotOurDirectory)
	}
	if err != nil {
		_ = r.Close()
		return nil, nil, err
	}
	return r, st, nil
}

type rootDir struct {
	*os.Root
	path string
	mode fs.FileMode
}

func (d *rootDir) Path() string { return d.path }

// self opens the directory itself, for the calls os.Root has no method for.
func (d *rootDir) self(do func(*os.File) error) error {
	f, err := d.Open(".")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return do(f)
}

func (d *rootDir) Entries() (des []fs.DirEntry, err error) {
	err = d.self(func(f *os.File) error { des, err = f.ReadDir(-1); return err })
	return des, err
}

func (d *rootDir) Chmod(perm fs.FileMode) error {
	if d.mode == perm {
		return nil
	}
	if err := d.self(func(f *os.File) error { return f.Chmod(perm) }); err != nil {
		return err
	}
	d.mode = perm
	return nil
}

func (d *rootDir) Sync() error { return d.self((*os.File).Sync) }

func (d *rootDir) ReadFile(name string, limit int64) ([]byte, error) {
	path := filepath.Join(d.path, name)
	lst, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !lst.Mode().IsRegular() || lst.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes (%s, %d bytes)", path, limit, lst.Mode().Type(), lst.Size())
	}
	f, err := d.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err != nil || !os.SameFile(lst, st) {
		return nil, fmt.Errorf("%s was replaced while being opened", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("%s is over the %d-byte limit", path, limit)
	}
	return data, err
}

// tempSeq makes temp names unique within the process; the time makes them unique across restarts.
var tempSeq atomic.Uint64

func (d *rootDir) CreateTemp(prefix string) (tempFile, error) {
	for range 100 {
		name := prefix + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatUint(tempSeq.Add(1), 36)
		// O_EXCL: os.Root never follows a symlink for it.
		f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("create temp file %s*: %w", filepath.Join(d.path, prefix), fs.ErrExist)
}
