package debroot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Spec is everything that decides a root's content; Key names its cache entry.
type Spec struct {
	Suite  string // e.g. "trixie"
	Mirror string // "" means DefaultMirror()
	// Packages are debootstrap --include'd on top of --variant=minbase.
	Packages []string
	// Tool is "" (debootstrap) or "mmdebstrap". bookworm's debootstrap 1.0.128 cannot install a trixie
	// root whose packages pull in systemd (libvirt-daemon-driver-qemu does, through systemd-container):
	// dpkg refuses systemd in the same batch as its pre-dependency libsystemd-shared. mmdebstrap installs
	// through apt, which orders pre-dependencies.
	Tool string
}

// layoutVersion changes when the build steps below change in a way the spec does not show.
const layoutVersion = "1"

// DefaultMirror is $GUEST_DEBIAN_MIRROR, else Debian's own mirror.
func DefaultMirror() string {
	if m := os.Getenv("GUEST_DEBIAN_MIRROR"); m != "" {
		return m
	}
	return "http://deb.debian.org/debian"
}

func (s Spec) mirror() string {
	if s.Mirror == "" {
		return DefaultMirror()
	}
	return s.Mirror
}

func (s Spec) tool() string {
	if s.Tool == "" {
		return "debootstrap"
	}
	return s.Tool
}

// Key is a short hash of the spec.
func (s Spec) Key() string {
	pkgs := append([]string(nil), s.Packages...)
	sort.Strings(pkgs)
	text := fmt.Sprintf("layout=%s\nsuite=%s\nmirror=%s\npackages=%s",
		layoutVersion, s.Suite, s.mirror(), strings.Join(pkgs, ","))
	if s.Tool != "" { // keeps the keys of debootstrap roots as they were
		text += "\ntool=" + s.Tool
	}
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])[:16]
}

// Debootstrap runs debootstrap (or spec.Tool) --variant=minbase for spec into rootfs, its output going to
// logFile.
func Debootstrap(ctx context.Context, rootfs, logFile string, spec Spec) error {
	tool := "debootstrap"
	var extra []string
	if spec.Tool == "mmdebstrap" {
		tool, extra = "mmdebstrap", []string{"--mode=root"}
	}
	args := append(extra, "--variant=minbase", "--include="+strings.Join(spec.Packages, ","), spec.Suite, rootfs, spec.mirror())
	return Run(ctx, logFile, tool, args...)
}

// doneMarker is written last into a finished root: a root without it is rebuilt.
const doneMarker = ".debroot-complete"

// Ensure returns the directory of the cached root for spec under cacheDir (root-<key>), building it first
// when it is missing. An exclusive flock on <cacheDir>/root-<key>.lock keeps concurrent runs from building
// twice. built says whether this call built it; logf receives progress lines.
func Ensure(ctx context.Context, cacheDir string, spec Spec, logf func(string, ...any)) (dir string, built bool, err error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", false, fmt.Errorf("create root cache dir %s: %w", cacheDir, err)
	}
	name := "root-" + spec.Key()
	dir = filepath.Join(cacheDir, name)
	unlock, err := Lock(filepath.Join(cacheDir, name+".lock"))
	if err != nil {
		return "", false, err
	}
	defer unlock()

	if _, err := os.Stat(filepath.Join(dir, doneMarker)); err == nil {
		return dir, false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", false, fmt.Errorf("remove incomplete root %s: %w", dir, err)
	}
	work, err := os.MkdirTemp(cacheDir, name+".build-")
	if err != nil {
		return "", false, fmt.Errorf("create root build dir: %w", err)
	}
	defer func() {
		UnmountUnder(work)
		_ = os.RemoveAll(work)
	}()
	rootfs := filepath.Join(work, "rootfs")
	start := time.Now()
	logf("debroot: %s %s (%s) into %s", spec.tool(), spec.Suite, strings.Join(spec.Packages, ","), rootfs)
	if err := Debootstrap(ctx, rootfs, filepath.Join(work, "debootstrap.log"), spec); err != nil {
		return "", false, err
	}
	logf("debroot: %s took %s", spec.tool(), time.Since(start).Round(time.Second))
	// The package cache is only weight in the root.
	for _, d := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, d, "*"))
		for _, m := range matches {
			if b := filepath.Base(m); b != "partial" && b != "lock" {
				_ = os.RemoveAll(m)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, doneMarker), []byte(spec.Key()+"\n"), 0o644); err != nil {
		return "", false, fmt.Errorf("mark root complete: %w", err)
	}
	if err := os.Rename(rootfs, dir); err != nil {
		return "", false, fmt.Errorf("move root into cache: %w", err)
	}
	return dir, true, nil
}

// Lock takes an exclusive flock on path (created if missing) and returns its release.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
