package downwardapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// dataLink is the symlink kubelet's AtomicWriter renames into place on every update
// (k8s.io/kubernetes pkg/volume/util/atomic_writer.go, step 9).
const dataLink = "..data"

// maxSwapRetries bounds re-reads when a swap removes the directory being read.
const maxSwapRetries = 5

// fileState is what one read of one file found. Two states are equal when a re-read would change
// nothing a consumer can see.
type fileState struct {
	present bool
	data    []byte
	err     error // the file exists but could not be used (too large, not regular, unreadable)
}

func (a fileState) equal(b fileState) bool {
	sameErr := a.err == nil && b.err == nil || a.err != nil && b.err != nil && a.err.Error() == b.err.Error()
	return a.present == b.present && bytes.Equal(a.data, b.data) && sameErr
}

// readFiles reads names from dir. In a kubelet volume it reads them all through the timestamped directory
// ..data points at, so that they come from the same update, and starts again if that directory vanishes
// mid-read (the next swap happened). Without ..data it reads dir/name directly.
func readFiles(dir string, names []string) []fileState {
	states := make([]fileState, len(names))
	for attempt := 0; ; attempt++ {
		base := dir
		target, linkErr := os.Readlink(filepath.Join(dir, dataLink))
		if linkErr == nil {
			base = target
			if !filepath.IsAbs(target) {
				base = filepath.Join(dir, target)
			}
		}
		anyAbsent := false
		for i, name := range names {
			states[i] = readFile(filepath.Join(base, name), filepath.Join(dir, name))
			anyAbsent = anyAbsent || !states[i].present
		}
		if linkErr != nil || !anyAbsent || attempt == maxSwapRetries {
			return states
		}
		if now, err := os.Readlink(filepath.Join(dir, dataLink)); err == nil && now == target {
			return states // the payload really lacks the file
		}
	}
}

// readFile reads at most MaxFileSize+1 bytes of path; shown is the user-visible path errors name.
// O_NONBLOCK keeps a FIFO planted in a plain directory from blocking the watcher.
func readFile(path, shown string) fileState {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fileState{}
	}
	if err != nil {
		return fileState{present: true, err: fmt.Errorf("opening %s: %w", shown, unwrapPath(err))}
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fileState{present: true, err: fmt.Errorf("stat %s: %w", shown, unwrapPath(err))}
	}
	if !fi.Mode().IsRegular() {
		return fileState{present: true, err: fmt.Errorf("%s is not a regular file (%s)", shown, fi.Mode().Type())}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return fileState{present: true, err: fmt.Errorf("reading %s: %w", shown, unwrapPath(err))}
	}
	if len(data) > MaxFileSize {
		return fileState{present: true, err: &FieldError{Source: shown, Err: errTooLarge}}
	}
	return fileState{present: true, data: data}
}

// unwrapPath drops the *PathError's path, which names the timestamped directory rather than the
// user-visible file: the message must stay the same across swaps to compare equal.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
