package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	Mounts    []string          // host mounts under the work dir
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
	if work == "" {
		return s, nil
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return s, fmt.Errorf("host mounts: %w", err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], work) {
			s.Mounts = append(s.Mounts, f[1])
		}
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
		if !contains(before.Cgroups, c) {
			out = append(out, "cgroup "+c)
		}
	}
	for _, m := range after.Mounts {
		out = append(out, "mount "+m)
	}
	for _, p := range after.Processes {
		out = append(out, "process "+p)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
