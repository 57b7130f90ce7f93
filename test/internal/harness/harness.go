package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/hooks"
)

// HooksRoot is where KubeVirt's hook Manager looks for sidecar sockets (hooks.HookSocketsSharedDirectory).
const HooksRoot = hooks.HookSocketsSharedDirectory

// LockFile serialises every test process that uses the hook Manager: it collects ALL sockets
// under HooksRoot, so two packages' sidecars must never be there at once. A top-level file is
// ignored by the Manager (manager.go collectSideCarSockets skips non-directories).
const LockFile = HooksRoot + "/.test.lock"

// RepoRoot is the sidecar module's root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Build compiles the sidecar into dir with `make build`, so the binary the tests drive is built exactly as
// the image builds it (the build tags, flags and ldflags are defined once, in the Makefile), and returns
// its path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "sriov-udn-binding")
	if err := MakeBuild(bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Main is a test package's TestMain: it builds the sidecar once into a temporary directory that the pod's uid
// 107 can reach (tests run it as that user too), stores the binary's path in *bin, runs the tests and returns
// their exit code; the directory goes with them. Use: os.Exit(harness.Main(m, &sidecarBin)).
func Main(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "sidecar-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// MakeBuild runs `make build BIN=bin` in the repository root.
func MakeBuild(bin string) error {
	cmd := exec.Command("make", "--no-print-directory", "build", "BIN="+bin)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make build BIN=%s: %w\n%s", bin, err, out)
	}
	return nil
}

// ImageEnv is the environment the sidecar's image sets (images/Containerfile ENV lines: the Go runtime's
// settings), so that a test or the bench runs the binary as KubeVirt runs the image.
func ImageEnv() ([]string, error) {
	path := filepath.Join(RepoRoot(), "images", "Containerfile")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var env []string
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENV ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			if !strings.Contains(kv, "=") {
				return nil, fmt.Errorf("%s: ENV %q: only the KEY=VALUE form is read", path, rest)
			}
			env = append(env, kv)
		}
	}
	if len(env) == 0 {
		return nil, fmt.Errorf("%s: no ENV line", path)
	}
	return env, nil
}

// RequireRoot skips, saying why, when the test cannot create KubeVirt's hook root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("skipping: KubeVirt's hook Manager is fixed to %s, which needs root to create (CI runs as root)", HooksRoot)
	}
}

// LockHooksRoot takes an exclusive flock on LockFile until the test ends.
func LockHooksRoot(t testing.TB) {
	t.Helper()
	require.NoError(t, os.MkdirAll(HooksRoot, 0o755))
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}

// SidecarDir creates HooksRoot/hook-sidecar-<suffix>: what the compute container sees of the
// sidecar's hooks mount (subPath = container name). It is removed when the test ends.
func SidecarDir(t testing.TB, suffix string) string {
	t.Helper()
	dir := filepath.Join(HooksRoot, "hook-sidecar-"+suffix)
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Process is a running sidecar.
type Process struct {
	cmd    *exec.Cmd
	logs   LockedBuffer
	lines  chan map[string]any
	exited chan struct{}
	err    error
}

// Start runs bin with args and returns once it logged "started" (its socket is listening).
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartWith(t, nil, bin, args...)
}

// StartWith is Start with a hook that adjusts the command before it runs (credentials, environment).
func StartWith(t testing.TB, adjust func(*exec.Cmd), bin string, args ...string) *Process {
	t.Helper()
	p := &Process{cmd: exec.Command(bin, args...), lines: make(chan map[string]any, 1024), exited: make(chan struct{})}
	env, err := ImageEnv()
	require.NoError(t, err)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if adjust != nil {
		adjust(p.cmd)
	}
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go p.readLogs(stderr)
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			t.Logf("sidecar logs:\n%s", p.Logs())
		}
	})
	_, err = p.WaitLog(func(l map[string]any) bool { return l["msg"] == "started" }, 20*time.Second)
	require.NoError(t, err, "sidecar did not start; logs:\n%s", p.Logs())
	return p
}

func (p *Process) readLogs(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		_, _ = fmt.Fprintf(&p.logs, "%s\n", line) // one Write: a reader never sees half a line
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			select {
			case p.lines <- m:
			default: // nobody is reading; the text is still in logs
			}
		}
	}
	p.err = p.cmd.Wait()
	close(p.lines)
	close(p.exited)
}

// WaitLog returns the first JSON log line (from now on) for which match is true.
func (p *Process) WaitLog(match func(map[string]any) bool, timeout time.Duration) (map[string]any, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return nil, fmt.Errorf("sidecar exited before the expected log line: %v", p.err)
			}
			if match(l) {
				return l, nil
			}
		case <-timer.C:
			return nil, fmt.Errorf("no matching log line within %s", timeout)
		}
	}
}

// Logs returns everything the sidecar wrote to stderr so far.
func (p *Process) Logs() string { return p.logs.String() }

// Pid is the sidecar's process id (for /proc figures such as VmHWM).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the sidecar.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the sidecar to exit and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("sidecar still running after %s", timeout)
	}
}

// HasSocket reports whether any regular entry in dir is a unix socket.
func HasSocket(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 && strings.HasSuffix(e.Name(), ".sock") {
			return true
		}
	}
	return false
}
