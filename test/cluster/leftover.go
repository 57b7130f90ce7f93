package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// hostPaths are the host paths kubelet and containerd write whatever their flags say (kubelet's device manager
// ignores --root-dir; containerd's opt plugin; the CNI plugins' default state); the node keeps them private, and
// the leftover check proves it.
func hostPaths() []string {
	return []string{"/var/lib/kubelet", "/var/lib/cni", "/var/lib/containerd", "/opt/containerd", "/usr/libexec/kubernetes",
		"/run/containerd", "/etc/cni/net.d", "/var/log/pods", "/var/log/containers"}
}

// HostState is what the node could leave behind on the host, read before and after it ran.
type HostState struct {
	Sysctls   map[string]string // the sysctls kubelet writes
	Paths     map[string]bool   // hostPaths that exist
	Cgroups   []string          // directories named cgroupRoot in any hierarchy
	Mounts    []string          // every mount of the host's mount namespace: "target (type source)"
	Modules   []string          // loaded kernel modules (/proc/modules; none where the kernel has no module support)
	Devices   []string          // every node under /dev but the terminals of /dev/pts: "path mode major:minor"
	Processes []string          // processes whose command line names the work dir
}

// ReadHostState reads the host's state as far as the node could change it; work is the node's work dir ("" before
// it exists).
func ReadHostState(work string) (HostState, error) {
	s := HostState{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	for key := range kernelDefaults() {
		b, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			return s, fmt.Errorf("host sysctl %s: %w", key, err)
		}
		s.Sysctls[key] = strings.TrimSpace(string(b))
	}
	for _, p := range hostPaths() {
		if _, err := os.Lstat(p); err == nil {
			s.Paths[p] = true
		}
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return s, err
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, cgroupRoot)); err == nil {
			s.Cgroups = append(s.Cgroups, filepath.Join(h, cgroupRoot))
		}
	}
	// The node's mount namespace shares its mounts' propagation (kubelet's Bidirectional mounts need it), so a
	// mount made inside it can reach the host's namespace: every mount is compared, not only the work dir's.
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return s, fmt.Errorf("host mounts: %w", err)
	}
	others := otherSuitesBuildDirs()
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 2 && !underAny(f[1], others) && !otherSuitesNetns(f[1]) {
			s.Mounts = append(s.Mounts, fmt.Sprintf("%s (%s %s)", f[1], f[2], f[0]))
		}
	}
	if s.Modules, err = loadedModules("/proc/modules"); err != nil {
		return s, err
	}
	if s.Devices, err = deviceNodes("/dev"); err != nil {
		return s, err
	}
	if work == "" {
		return s, nil
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(work)) {
			continue
		}
		s.Processes = append(s.Processes, filepath.Base(filepath.Dir(p))+": "+strings.Join(strings.Fields(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))), " "))
	}
	sort.Strings(s.Processes)
	return s, nil
}

// Leftovers lists what after holds that before did not: each a line naming the kind and the thing.
func Leftovers(before, after HostState) []string {
	var out []string
	for key, v := range after.Sysctls {
		if before.Sysctls[key] != v {
			out = append(out, fmt.Sprintf("sysctl %s: %s, was %s", key, v, before.Sysctls[key]))
		}
	}
	for p := range after.Paths {
		if !before.Paths[p] {
			out = append(out, "host path "+p)
		}
	}
	for _, c := range after.Cgroups {
		if !slices.Contains(before.Cgroups, c) {
			out = append(out, "cgroup "+c)
		}
	}
	for _, kind := range []struct {
		name          string
		before, after []string
	}{{"mount", before.Mounts, after.Mounts}, {"kernel module", before.Modules, after.Modules}, {"device", before.Devices, after.Devices}} {
		for _, x := range kind.after {
			if !slices.Contains(kind.before, x) {
				out = append(out, kind.name+" "+x)
			}
		}
	}
	for _, p := range after.Processes {
		out = append(out, "process "+p)
	}
	sort.Strings(out)
	return out
}

// otherSuitesBuildDirs are the caches where the suites `make test` runs beside this one (test/guest, the
// background prefetch, test-netconvert) build their roots: debootstrap and mmdebstrap mount /proc, /sys and /dev
// inside a root while they build it, and a build may be under way when the node's check reads the host. Each
// build holds its cache entry's lock and unmounts its own; none is the node's.
func otherSuitesBuildDirs() []string {
	return []string{guestCacheDir(), trixietools.DefaultCacheDir(), "/var/cache/sriov-udn-binding/roots"}
}

// otherSuitesNetns says whether the mount point is a named network namespace that is not the node's, or
// iproute2's directory of them: `ip netns add` (test/guest's VF peers, beside this suite) bind-mounts each
// namespace under /run/netns, and mounts that directory itself the first time it runs on the host. The node's
// pods' namespaces are containerd's, named cni-<uuid>, and stay checked.
func otherSuitesNetns(target string) bool {
	for _, dir := range []string{"/run/netns", "/var/run/netns"} {
		if target == dir {
			return true
		}
		if name, ok := strings.CutPrefix(target, dir+"/"); ok {
			return !strings.HasPrefix(name, "cni-")
		}
	}
	return false
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// loadedModules lists the kernel's loaded modules by name; a kernel built without module support has no
// /proc/modules, and then none can be loaded.
func loadedModules(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host kernel modules: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	sort.Strings(out)
	return out, nil
}

// deviceNodes lists every entry under root, each with its mode and, for a device, its numbers. The
// pseudo-terminals of root/pts are left out: every terminal on the host (and every `kubectl exec -t`) opens and
// closes one, so they come and go while the node runs without being the node's.
func deviceNodes(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // gone between the listing and the read
				return nil
			}
			return err
		}
		if path == filepath.Join(root, "pts") {
			return fs.SkipDir
		}
		fi, err := os.Lstat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		entry := fmt.Sprintf("%s %s", path, fi.Mode().Type())
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0 {
			entry += fmt.Sprintf(" %d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
		}
		out = append(out, entry)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("host devices under %s: %w", root, err)
	}
	return out, nil
}
