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
	"time"

	"golang.org/x/sys/unix"
)

// FileSystem is the seam Writer does its I/O through: the real one is OSFileSystem; tests inject
// one that fails (or "dies") mid-write to prove no torn file is ever visible.
//
// Everything below the cache root is reached through an opened directory, by plain names, never by
// following a symlink: the compute container can write the hooks emptyDir, and a symlinked
// <root>/<vmi-uid> (say, to "..", which is the socket's directory in the default layout) must not
// turn our writes, chmods and removals onto someone else's files.
type FileSystem interface {
	// OpenDir opens root/name, which must be a real directory (not a symlink) owned by this process's
	// user; root itself must not be a symlink either (its parent may be). With create, root (MkdirAll) and root/name (mode perm) are created when missing. Without
	// it, a missing root/name is an error satisfying errors.Is(err, fs.ErrNotExist).
	OpenDir(root, name string, create bool, perm fs.FileMode) (Dir, error)
}

// Dir is one opened, verified directory. Names are entries directly in it.
type Dir interface {
	// Path is the directory's path, for messages.
	Path() string
	// Entries lists the directory.
	Entries() ([]fs.DirEntry, error)
	// ReadFile reads name if it is a regular file of at most limit bytes. A symlink, FIFO, device or
	// directory, or a larger file, is an error; it never blocks on a FIFO.
	ReadFile(name string, limit int64) ([]byte, error)
	// CreateTemp creates a new file named prefix + random suffix, mode 0600, refusing to follow a symlink.
	CreateTemp(prefix string) (TempFile, error)
	// Rename replaces newName with oldName (both in this directory).
	Rename(oldName, newName string) error
	// Remove unlinks name; never a directory, and a symlink is unlinked itself, not its target.
	Remove(name string) error
	// Chmod sets the directory's own mode.
	Chmod(perm fs.FileMode) error
	// Sync fsyncs the directory so a rename in it survives a node crash.
	Sync() error
	Close() error
}

// TempFile is the part of *os.File that an atomic write uses.
type TempFile interface {
	Name() string // the base name, in its Dir
	Write(p []byte) (int, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// ErrNotOurDirectory is returned for a VMI directory that is a symlink, not a directory, or owned
// by another user: the writer never works inside it.
var ErrNotOurDirectory = errors.New("not a directory this writer may use")

// OSFileSystem is FileSystem on the real file system (Linux *at system calls).
type OSFileSystem struct{}

func (OSFileSystem) OpenDir(root, name string, create bool, perm fs.FileMode) (Dir, error) {
	if create {
		if err := os.MkdirAll(root, perm); err != nil {
			return nil, err
		}
	}
	// The root's parent is the operator's choice (symlinks there are theirs); the root itself usually
	// sits in the hooks emptyDir that the compute container can write, so it must not be a symlink.
	root = filepath.Clean(root)
	parentFD, err := unix.Open(filepath.Dir(root), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Dir(root), Err: err}
	}
	rootFD, err := unix.Openat(parentFD, filepath.Base(root), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	_ = unix.Close(parentFD)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("cache root %s: %w (a symlink or not a directory)", root, ErrNotOurDirectory)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer func() { _ = unix.Close(rootFD) }()
	path := filepath.Join(root, name)
	if create {
		if err := unix.Mkdirat(rootFD, name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, &fs.PathError{Op: "mkdir", Path: path, Err: err}
		}
	}
	fd, err := unix.Openat(rootFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s: %w (a symlink or not a directory)", path, ErrNotOurDirectory)
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if int(st.Uid) != os.Geteuid() {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%s: %w (owned by uid %d, not %d)", path, ErrNotOurDirectory, st.Uid, os.Geteuid())
	}
	return &osDir{fd: fd, path: path, mode: fs.FileMode(st.Mode & 0o7777)}, nil
}

type osDir struct {
	fd   int
	path string
	mode fs.FileMode
}

func (d *osDir) Path() string { return d.path }

func (d *osDir) Entries() ([]fs.DirEntry, error) {
	// A fresh descriptor of the same directory: reading a dup would move the shared offset.
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer func() { _ = f.Close() }()
	return f.ReadDir(-1)
}

func (d *osDir) ReadFile(name string, limit int64) ([]byte, error) {
	path := filepath.Join(d.path, name)
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over the %d-byte limit", path, limit)
	}
	return data, nil
}

// tempSeq makes temp names unique within the process; the time makes them unique across restarts.
var tempSeq atomic.Uint64

func (d *osDir) CreateTemp(prefix string) (TempFile, error) {
	for range 100 {
		name := prefix + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatUint(tempSeq.Add(1), 36)
		fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "create", Path: filepath.Join(d.path, name), Err: err}
		}
		return &osTempFile{File: os.NewFile(uintptr(fd), filepath.Join(d.path, name)), name: name}, nil
	}
	return nil, fmt.Errorf("create temp file %s*: %w", filepath.Join(d.path, prefix), fs.ErrExist)
}

func (d *osDir) Rename(oldName, newName string) error {
	if err := unix.Renameat(d.fd, oldName, d.fd, newName); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, oldName), New: filepath.Join(d.path, newName), Err: err}
	}
	return nil
}

func (d *osDir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

func (d *osDir) Chmod(perm fs.FileMode) error {
	if d.mode == perm {
		return nil
	}
	if err := unix.Fchmod(d.fd, uint32(perm)); err != nil {
		return &fs.PathError{Op: "chmod", Path: d.path, Err: err}
	}
	d.mode = perm
	return nil
}

func (d *osDir) Sync() error {
	if err := unix.Fsync(d.fd); err != nil {
		return &fs.PathError{Op: "fsync", Path: d.path, Err: err}
	}
	return nil
}

func (d *osDir) Close() error { return unix.Close(d.fd) }

type osTempFile struct {
	*os.File
	name string
}

func (f *osTempFile) Name() string { return f.name }
