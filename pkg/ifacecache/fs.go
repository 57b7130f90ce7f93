package ifacecache

import (
	"io/fs"
	"os"
)

// FileSystem is the seam Writer does its I/O through: the real one is OSFileSystem; tests inject
// one that fails (or "dies") mid-write to prove no torn file is ever visible.
type FileSystem interface {
	MkdirAll(path string, perm fs.FileMode) error
	Chmod(path string, perm fs.FileMode) error
	ReadDir(path string) ([]fs.DirEntry, error)
	ReadFile(path string) ([]byte, error)
	// CreateTemp creates a new file in dir as os.CreateTemp does.
	CreateTemp(dir, pattern string) (TempFile, error)
	Rename(oldPath, newPath string) error
	Remove(path string) error
	// SyncDir fsyncs a directory so a rename in it survives a node crash.
	SyncDir(path string) error
}

// TempFile is the part of *os.File that an atomic write uses.
type TempFile interface {
	Name() string
	Write(p []byte) (int, error)
	Chmod(mode fs.FileMode) error
	Sync() error
	Close() error
}

// OSFileSystem is FileSystem on the real file system.
type OSFileSystem struct{}

func (OSFileSystem) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (OSFileSystem) Chmod(path string, perm fs.FileMode) error    { return os.Chmod(path, perm) }
func (OSFileSystem) ReadDir(path string) ([]fs.DirEntry, error)   { return os.ReadDir(path) }
func (OSFileSystem) ReadFile(path string) ([]byte, error)         { return os.ReadFile(path) }
func (OSFileSystem) Rename(oldPath, newPath string) error         { return os.Rename(oldPath, newPath) }
func (OSFileSystem) Remove(path string) error                     { return os.Remove(path) }

func (OSFileSystem) CreateTemp(dir, pattern string) (TempFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err // not f: a typed nil *os.File would be a non-nil TempFile
	}
	return f, nil
}

func (OSFileSystem) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	syncErr := d.Sync()
	closeErr := d.Close()
	if syncErr != nil {
		return syncErr
	}
	return closeErr
}
