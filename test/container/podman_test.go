package container

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// engine is podman with storage of this package's own, so that parallel runs never share images or
// containers, with the two settings these machines need (DESIGN.md 4d): vfs storage (works on any
// filesystem, needs no overlay module) and runc (crun refuses the hosts' hybrid cgroup layout).
// Its libpod state (--tmpdir: locks, events) is its own too.
type engine struct{ root, runroot, tmpdir string }

func (e engine) global() []string {
	return []string{"--root", e.root, "--runroot", e.runroot, "--tmpdir", e.tmpdir, "--storage-driver", "vfs", "--runtime", "runc"}
}

// command is `podman <global flags> args...`.
func (e engine) command(args ...string) *exec.Cmd {
	return exec.Command("podman", append(e.global(), args...)...)
}

// run runs podman and returns its stdout; the error names the command and carries stderr.
func (e engine) run(args ...string) (string, error) {
	cmd := e.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// containerState is the part of `podman container inspect` the tests read.
type containerState struct {
	Running   bool
	Pid       int
	ExitCode  int
	OOMKilled bool
}

func (e engine) state(t *testing.T, name string) containerState {
	t.Helper()
	out, err := e.run("container", "inspect", name)
	require.NoError(t, err)
	var got []struct{ State containerState }
	require.NoError(t, json.Unmarshal([]byte(out), &got), "podman container inspect %s", name)
	require.Len(t, got, 1)
	return got[0].State
}

// remove force-removes a container, if it exists.
func (e engine) remove(t *testing.T, name string) {
	if out, err := e.run("rm", "--force", "--ignore", "--time", "0", name); err != nil {
		t.Logf("cleanup: %v %s", err, out)
	}
}

// inheritEnv gives podman the test's environment (harness.StartWith starts a command with PATH only).
func inheritEnv(cmd *exec.Cmd) { cmd.Env = os.Environ() }
