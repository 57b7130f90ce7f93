package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
)

// Outcome is what one attack did to the sidecar.
type Outcome struct {
	Name     string        `json:"name"`
	Server   string        `json:"server"`   // what the server did to the attacking connections
	Duration time.Duration `json:"duration"` // the attack's own time, its hold included
	// PeakRSSKiB is the sidecar's VmHWM after the attack (a fresh process per attack: the attack's peak).
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	ReadyKiB   int64 `json:"ready_rss_kib"`
	Alive      bool  `json:"alive"`
}

// AttackTimeout bounds one attack, its hold included.
const AttackTimeout = 60 * time.Second

// Run attacks the sidecar (pid) listening on socket with a, then waits until the sidecar holds no more
// connections than before (the attacker's are closed: what the server still has of them it drops as it reads
// their end) and reports its peak RSS.
func Run(a Attack, socket string, pid int) (Outcome, error) {
	o := Outcome{Name: a.Name}
	before, err := bench.ReadProcStats(pid)
	if err != nil {
		return o, err
	}
	o.ReadyKiB = before.HWMKiB
	baseline, err := socketFDs(pid)
	if err != nil {
		return o, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), AttackTimeout)
	defer cancel()
	t0 := time.Now()
	o.Server, err = a.Run(ctx, socket)
	o.Duration = time.Since(t0)
	if err != nil {
		return o, fmt.Errorf("%s: %w", a.Name, err)
	}
	if err := waitSockets(pid, baseline, 30*time.Second); err != nil {
		return o, fmt.Errorf("%s: %w", a.Name, err)
	}
	after, err := bench.ReadProcStats(pid)
	if err != nil {
		o.Alive = false
		return o, fmt.Errorf("%s: the sidecar is gone: %w", a.Name, err)
	}
	o.Alive = processAlive(pid)
	o.PeakRSSKiB = after.HWMKiB
	return o, nil
}

// socketFDs counts the sidecar's open sockets (its listeners and connections).
func socketFDs(pid int) (int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", dir, err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n, nil
}

// waitSockets polls the sidecar's socket count until it is back to baseline: the connections of an attack
// that ended are closed by the server as it reads their end, or by its handshake and idle limits.
func waitSockets(pid, baseline int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := socketFDs(pid)
		if err != nil {
			return err
		}
		if n <= baseline {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sidecar still holds %d sockets, %d before the attack, %s after it ended", n, baseline, timeout)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: nothing to wait on
	}
}

// processAlive reads the process state: running or sleeping, not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
