package faults

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Case 7: a second instance must not take over a socket another process listens on.
func TestSocket_SecondInstanceOnLiveSocket_RefusesAndExits1NamingThePath(t *testing.T) {
	l := newLayout(t)
	first := start(t, l)
	before, err := os.Stat(l.Socket())
	require.NoError(t, err)

	code, out := runToExit(t, 10*time.Second, nil, args(l)...)
	assert.Equal(t, 1, code, "second instance output:\n%s", out)
	assert.Contains(t, out, l.Socket())

	after, err := os.Stat(l.Socket())
	require.NoError(t, err, "the first instance's socket is gone")
	assert.True(t, os.SameFile(before, after), "the socket was replaced")
	assert.NoError(t, callInfo(l.Socket(), 5*time.Second), "the first instance must still answer")

	require.NoError(t, first.Signal(syscall.SIGTERM))
	code, err = first.Wait(stopBound)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
}

// At exit the sidecar removes its own socket only: one put there by another process stays.
func TestSocket_ReplacedWhileRunning_OtherSocketLeftAtExit(t *testing.T) {
	l := newLayout(t)
	proc := start(t, l)
	require.NoError(t, os.Remove(l.Socket()))
	other, err := net.Listen("unix", l.Socket())
	require.NoError(t, err)
	other.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { _ = other.Close() })
	mine, err := os.Stat(l.Socket())
	require.NoError(t, err)

	require.NoError(t, proc.Signal(syscall.SIGTERM))
	code, err := proc.Wait(stopBound)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	st, err := os.Stat(l.Socket())
	require.NoError(t, err, "the sidecar removed a socket it did not create")
	assert.True(t, os.SameFile(mine, st))
}
