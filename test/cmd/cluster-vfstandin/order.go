package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// KubeVirt's hook Manager calls the OnDefineDomain of the pod's sidecars in the order their sockets first
// answered Info: each pass over the hooks directory reads hook-sidecar-0, -1, ... and appends the sockets that
// answer; the sort that follows orders each sidecar's own hook points, not the sidecars (v1.8.4
// pkg/hooks/manager.go collectSideCarSockets, sortCallbacksPerHookPoint). A stand-in whose socket answers in an
// earlier pass than ours runs first and finds no hostdev to swap, on every define. So the stand-in listens only
// once our sidecar does: the pod's containers share a network namespace, and /proc/net/unix lists every unix
// socket bound in it with its path (as bound in its own container: /var/run/kubevirt-hooks/<name>), so the
// stand-in sees ours although its mount does not. Seeing ours listen is not quite enough: a pass may read
// hook-sidecar-0 just before ours listens and hook-sidecar-1 just after the stand-in does. So the stand-in lets
// ours listen for a margin of several of the Manager's passes (300 ms apart) first: the pass that finds the
// stand-in then comes after one that found ours.

// procNetUnix is the kernel's list of the network namespace's unix sockets.
const procNetUnix = "/proc/net/unix"

// listeningUnixPath says whether the /proc/net/unix text r lists a listening socket (flags __SO_ACCEPTCON,
// 0x10000) bound at a path whose base name is name.
func listeningUnixPath(r io.Reader, name string) (bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		if first { // "Num RefCount Protocol Flags Type St Inode Path"
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 64)
		if err != nil {
			continue
		}
		path := f[7]
		if flags&0x10000 != 0 && (path == name || strings.HasSuffix(path, "/"+name)) {
			return true, nil
		}
	}
	return false, sc.Err()
}

// awaitListener waits, reading procFile every interval, until a socket named name listens in the network
// namespace, or timeout passes (then it returns an error saying so; the caller listens anyway and the order
// is left to chance).
func awaitListener(ctx context.Context, procFile, name string, timeout, interval time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		f, err := os.Open(procFile)
		if err != nil {
			return fmt.Errorf("wait for %s to listen: %w", name, err)
		}
		ok, err := listeningUnixPath(f, name)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("wait for %s to listen: read %s: %w", name, procFile, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to listen: not in %s after %s", name, procFile, timeout)
		case <-tick.C:
		}
	}
}
