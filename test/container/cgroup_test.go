package container

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memCgroup is the memory cgroup a process is in: the v1 memory controller's directory, or the v2 unified
// one. Read from the host, so it works on a container's process too.
type memCgroup struct {
	dir string
	v2  bool
}

// memFigures are what the kernel enforces and saw; -1 where this cgroup version or kernel has no file.
type memFigures struct {
	LimitBytes     int64 // memory.limit_in_bytes (v1), memory.max (v2)
	SwapLimitBytes int64 // memory.memsw.limit_in_bytes (v1: memory+swap), memory.swap.max (v2: swap alone)
	PeakBytes      int64 // memory.max_usage_in_bytes (v1), memory.peak (v2, Linux >= 5.19); page cache included
	LimitHits      int64 // memory.failcnt (v1): times usage reached the limit and the kernel reclaimed
	OOMKills       int64 // oom_kill of memory.oom_control (v1, Linux >= 4.13) or memory.events (v2)
}

// parseProcCgroup finds the memory cgroup in /proc/<pid>/cgroup ("id:controllers:path" lines): the v1
// memory controller's line if there is one, else the v2 line ("0::path").
func parseProcCgroup(data string) (memCgroup, error) {
	var unified string
	haveUnified := false
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return memCgroup{}, fmt.Errorf("cgroup line %q: want id:controllers:path", line)
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", parts[2])}, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified, haveUnified = parts[2], true
		}
	}
	if !haveUnified {
		return memCgroup{}, fmt.Errorf("no memory controller and no unified hierarchy in %q", data)
	}
	return memCgroup{dir: filepath.Join("/sys/fs/cgroup", unified), v2: true}, nil
}

// parseCgroupValue reads one value file: a byte count, or "max" (v2: no limit), which is -1.
func parseCgroupValue(data string) (int64, error) {
	s := strings.TrimSpace(data)
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// parseCgroupKeys reads a flat keyed file ("oom_kill 0" lines: memory.oom_control, memory.events).
func parseCgroupKeys(data string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("cgroup keyed line %q: want key value", line)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cgroup keyed line %q: %w", line, err)
		}
		out[k] = n
	}
	return out, nil
}

func memCgroupOf(pid int) (memCgroup, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return memCgroup{}, fmt.Errorf("read the cgroups of pid %d: %w", pid, err)
	}
	return parseProcCgroup(string(data))
}

func (c memCgroup) figures() (memFigures, error) {
	f := memFigures{LimitBytes: -1, SwapLimitBytes: -1, PeakBytes: -1, LimitHits: -1, OOMKills: -1}
	value := func(name string, into *int64) error {
		data, err := os.ReadFile(filepath.Join(c.dir, name))
		if os.IsNotExist(err) {
			return nil // not this kernel's or configuration's (v1 memsw needs swap accounting)
		}
		if err != nil {
			return fmt.Errorf("read cgroup file: %w", err)
		}
		if *into, err = parseCgroupValue(string(data)); err != nil {
			return fmt.Errorf("cgroup file %s/%s: %w", c.dir, name, err)
		}
		return nil
	}
	keys := func(name string) error {
		data, err := os.ReadFile(filepath.Join(c.dir, name))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read cgroup file: %w", err)
		}
		m, err := parseCgroupKeys(string(data))
		if err != nil {
			return fmt.Errorf("cgroup file %s/%s: %w", c.dir, name, err)
		}
		if n, ok := m["oom_kill"]; ok {
			f.OOMKills = n
		}
		return nil
	}
	var err error
	if c.v2 {
		for name, into := range map[string]*int64{"memory.max": &f.LimitBytes, "memory.swap.max": &f.SwapLimitBytes, "memory.peak": &f.PeakBytes} {
			if err = value(name, into); err != nil {
				return f, err
			}
		}
		return f, keys("memory.events")
	}
	for name, into := range map[string]*int64{"memory.limit_in_bytes": &f.LimitBytes, "memory.memsw.limit_in_bytes": &f.SwapLimitBytes,
		"memory.max_usage_in_bytes": &f.PeakBytes, "memory.failcnt": &f.LimitHits} {
		if err = value(name, into); err != nil {
			return f, err
		}
	}
	return f, keys("memory.oom_control")
}

func TestParseProcCgroup_FindsTheMemoryCgroupOnEitherVersion(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       memCgroup
		err        string
	}{
		{"v1 hybrid (podman, cgroupfs)", "9:name=systemd:/libpod_parent/libpod-ab\n4:memory:/libpod_parent/libpod-ab\n0::/\n",
			memCgroup{dir: "/sys/fs/cgroup/memory/libpod_parent/libpod-ab"}, ""},
		{"v1 joined controllers", "3:cpu,memory:/a/b\n", memCgroup{dir: "/sys/fs/cgroup/memory/a/b"}, ""},
		{"v2", "0::/machine.slice/libpod-ab.scope/container\n", memCgroup{dir: "/sys/fs/cgroup/machine.slice/libpod-ab.scope/container", v2: true}, ""},
		{"no memory controller", "1:cpu:/a\n", memCgroup{}, "no memory controller"},
		{"malformed", "memory\n", memCgroup{}, "want id:controllers:path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup(tc.data)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseCgroupFiles_ValuesAndKeyedLines(t *testing.T) {
	v, err := parseCgroupValue("50331648\n")
	require.NoError(t, err)
	assert.Equal(t, int64(48<<20), v)
	v, err = parseCgroupValue("max\n")
	require.NoError(t, err)
	assert.Equal(t, int64(-1), v)
	_, err = parseCgroupValue("lots")
	assert.Error(t, err)

	m, err := parseCgroupKeys("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"oom_kill_disable": 0, "under_oom": 0, "oom_kill": 2}, m)
	_, err = parseCgroupKeys("oom_kill\n")
	assert.ErrorContains(t, err, "want key value")
}
