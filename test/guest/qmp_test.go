package guest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// TestQMP_AgainstHostQemu_CommandsRepliesErrorsAndEvents drives the host's qemu (no guest: -machine none,
// paused) through the migration test's QMP client: qemu connects to the test's socket, a command returns its
// value, a bad command's error names it, and an event (RESUME after cont) is waited for.
func TestQMP_AgainstHostQemu_CommandsRepliesErrorsAndEvents(t *testing.T) {
	qemu, err := debroot.FindCommand("qemu-system-x86_64")
	if err != nil {
		t.Skipf("skipping the QMP client test: %v (Debian: apt-get install qemu-system-x86)", err)
	}
	dir, err := os.MkdirTemp("", "sriovudn-qmp") // short: a unix socket path stays under 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	mon, err := listenQMP(dir, "qmp-test")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, append([]string{"-machine", "none", "-nodefaults", "-display", "none", "-S"}, mon.QemuArgs(dir)...)...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	q, err := mon.Accept(ctx)
	require.NoError(t, err, "qemu connects to the test's monitor socket")
	defer q.Close()

	ret, err := q.Execute(ctx, "query-status", nil)
	require.NoError(t, err)
	var status struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(ret, &status))
	assert.Equal(t, "prelaunch", status.Status, "qemu started with -S")

	_, err = q.Execute(ctx, "device_del", map[string]any{"id": "no-such-device"})
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "QMP device_del", "the error names the command")
		assert.Contains(t, err.Error(), "no-such-device", "and its arguments")
	}

	_, err = q.Execute(ctx, "cont", nil)
	require.NoError(t, err)
	_, err = q.WaitEvent(ctx, "RESUME", nil, nil)
	assert.NoError(t, err, "the RESUME event after cont")
}
