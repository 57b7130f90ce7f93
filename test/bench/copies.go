package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "kubevirt.io/api/core/v1"
)

// Smaps is one process's memory as /proc/<pid>/smaps_rollup counts it. PSS charges each shared page to the
// processes that map it in equal parts: with several copies of one image running on a node (one per VM pod),
// the binary's pages are paid once between them, private memory (Anonymous) by each.
type Smaps struct {
	RSSKiB, PSSKiB, PSSAnonKiB, PSSFileKiB, AnonKiB int64
}

// ReadSmaps reads /proc/<pid>/smaps_rollup.
func ReadSmaps(pid int) (Smaps, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup")
	b, err := os.ReadFile(path)
	if err != nil {
		return Smaps{}, fmt.Errorf("read %s: %w", path, err)
	}
	var s Smaps
	fields := map[string]*int64{"Rss:": &s.RSSKiB, "Pss:": &s.PSSKiB, "Pss_Anon:": &s.PSSAnonKiB, "Pss_File:": &s.PSSFileKiB, "Anonymous:": &s.AnonKiB}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if dst, ok := fields[f[0]]; ok {
			if *dst, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				return Smaps{}, fmt.Errorf("%s: %s: %w", path, f[0], err)
			}
		}
	}
	if s.RSSKiB == 0 {
		return Smaps{}, fmt.Errorf("%s: no Rss line", path)
	}
	return s, nil
}

// CopiesResult is the footprint of several copies of one sidecar running at once, as a node runs one per VM
// pod: the mean PSS of a copy and the largest private memory of any, idle and after each copy served the
// same calls.
type CopiesResult struct {
	Copies            int   `json:"copies"`
	Calls             int   `json:"calls_per_copy"`
	IdlePSSKiB        int64 `json:"idle_pss_kib"`
	IdleAnonKiB       int64 `json:"idle_anon_kib"`
	AfterCallsPSSKiB  int64 `json:"after_calls_pss_kib"`
	AfterCallsAnonKiB int64 `json:"after_calls_anon_kib"`
}

// MeasureCopies starts n copies with start, lets them settle, samples them, sends each calls rounds of
// Info + OnDefineDomain (Load), lets them settle again and samples them again; it stops them all.
func MeasureCopies(start func(i int) (*Process, error), n, calls int, vmi *v1.VirtualMachineInstance, settle time.Duration) (CopiesResult, error) {
	res := CopiesResult{Copies: n, Calls: calls}
	procs := make([]*Process, 0, n)
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for i := range n {
		p, err := start(i)
		if err != nil {
			return res, fmt.Errorf("copy %d: %w", i, err)
		}
		procs = append(procs, p)
	}
	sample := func() (pss, anon int64, err error) {
		for _, p := range procs {
			s, err := ReadSmaps(p.Pid())
			if err != nil {
				return 0, 0, err
			}
			pss += s.PSSKiB
			anon = max(anon, s.AnonKiB)
		}
		return pss / int64(len(procs)), anon, nil
	}
	time.Sleep(settle) // start-up work (GC, the scavenger) ends before the sample
	var err error
	if res.IdlePSSKiB, res.IdleAnonKiB, err = sample(); err != nil {
		return res, err
	}
	for i, p := range procs {
		if _, err := Load(p.Socket, calls, vmi); err != nil {
			return res, fmt.Errorf("copy %d: %w", i, err)
		}
	}
	time.Sleep(settle)
	res.AfterCallsPSSKiB, res.AfterCallsAnonKiB, err = sample()
	return res, err
}
