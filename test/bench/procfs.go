package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcStats is one sample of a process's footprint, read from /proc.
type ProcStats struct {
	RSSKiB       int64 // VmRSS of /proc/<pid>/status
	AnonKiB      int64 // RssAnon: private memory (heap, stacks), paid by every pod
	FileKiB      int64 // RssFile: mapped binary pages, shared through the page cache by pods on a node
	HWMKiB       int64 // VmHWM: peak RSS
	Threads      int64
	Ticks        int64 // utime+stime of /proc/<pid>/stat, all threads, in USER_HZ ticks
	VoluntaryCS  int64 // voluntary_ctxt_switches summed over /proc/<pid>/task/*
	InvoluntaryC int64 // nonvoluntary_ctxt_switches summed over /proc/<pid>/task/*
}

// ContextSwitches is voluntary plus involuntary switches.
func (s ProcStats) ContextSwitches() int64 { return s.VoluntaryCS + s.InvoluntaryC }

// ReadProcStats samples pid. /proc/<pid>/status counts context switches of the main thread only,
// so they are summed over every task; /proc/<pid>/stat times already cover all threads.
func ReadProcStats(pid int) (ProcStats, error) {
	var s ProcStats
	base := filepath.Join("/proc", strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(base, "status"))
	if err != nil {
		return s, fmt.Errorf("read process status: %w", err)
	}
	fields, err := ParseStatus(status)
	if err != nil {
		return s, fmt.Errorf("%s/status: %w", base, err)
	}
	s.RSSKiB, s.HWMKiB, s.Threads = fields["VmRSS"], fields["VmHWM"], fields["Threads"]
	s.AnonKiB, s.FileKiB = fields["RssAnon"], fields["RssFile"]
	stat, err := os.ReadFile(filepath.Join(base, "stat"))
	if err != nil {
		return s, fmt.Errorf("read process stat: %w", err)
	}
	if s.Ticks, err = ParseStatTicks(stat); err != nil {
		return s, fmt.Errorf("%s/stat: %w", base, err)
	}
	tasks, err := os.ReadDir(filepath.Join(base, "task"))
	if err != nil {
		return s, fmt.Errorf("list threads: %w", err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(base, "task", t.Name(), "status"))
		if err != nil {
			continue // the thread exited between ReadDir and ReadFile
		}
		tf, err := ParseStatus(b)
		if err != nil {
			return s, fmt.Errorf("%s/task/%s/status: %w", base, t.Name(), err)
		}
		s.VoluntaryCS += tf["voluntary_ctxt_switches"]
		s.InvoluntaryC += tf["nonvoluntary_ctxt_switches"]
	}
	return s, nil
}

// ParseStatus reads the integer fields of a /proc status file ("VmRSS:\t  1234 kB" -> 1234).
// Fields that are not a leading integer are skipped.
func ParseStatus(data []byte) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		out[key] = n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := out["voluntary_ctxt_switches"]; !ok {
		return nil, fmt.Errorf("no voluntary_ctxt_switches field")
	}
	return out, nil
}

// ParseStatTicks returns utime+stime (fields 14 and 15) of a /proc/<pid>/stat line. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
func ParseStatTicks(data []byte) (int64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' after the command name")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): utime is field 14 -> f[11], stime field 15 -> f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime %q: %w", f[11], err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime %q: %w", f[12], err)
	}
	return u + st, nil
}
