package faults

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/h2peer"
)

// stopBound is the default stop timeout (hooks.DefaultStopTimeout, 5 s) plus room for a loaded
// machine; gRPC's own connection timeout (120 s) is far beyond it.
const stopBound = 9 * time.Second

// peer connects to socket, writes nothing and reads nothing: a silent client until the test writes.
func peer(t *testing.T, socket string) *h2peer.Peer {
	t.Helper()
	p, err := h2peer.Dial(context.Background(), socket, h2peer.Options{NoPreface: true, NoRead: true})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// Case 4: a client that connects and never speaks must not hold the stop past the stop timeout.
func TestShutdown_SilentClientConnected_SIGTERMExitsWithinStopTimeout(t *testing.T) {
	l := newLayout(t)
	proc := start(t, l)
	peer(t, l.Socket())

	start := time.Now()
	require.NoError(t, proc.Signal(syscall.SIGTERM))
	code, err := proc.Wait(stopBound)
	require.NoError(t, err, "a connected client that never sent the HTTP/2 preface held the stop")
	assert.Equal(t, 0, code)
	assert.Less(t, time.Since(start), stopBound)
	assert.NoFileExists(t, l.Socket())
}

// A client that sent part of the preface and stalls is cut at the stop timeout.
func TestShutdown_StalledPrefaceClient_SIGTERMExitsWithinStopTimeout(t *testing.T) {
	l := newLayout(t)
	proc := start(t, l)
	require.NoError(t, peer(t, l.Socket()).WriteRaw([]byte(http2.ClientPreface[:16])))

	require.NoError(t, proc.Signal(syscall.SIGTERM))
	code, err := proc.Wait(stopBound)
	require.NoError(t, err, "a client stalled in the HTTP/2 preface held the stop")
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, l.Socket())
}

func TestShutdown_SilentClientConnected_ShutdownHookExitsWithinStopTimeout(t *testing.T) {
	l := newLayout(t)
	proc := start(t, l)
	peer(t, l.Socket())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := hooksv1alpha3.NewCallbacksClient(dial(t, l.Socket())).Shutdown(ctx, &hooksv1alpha3.ShutdownParams{})
	require.NoError(t, err)
	code, err := proc.Wait(stopBound)
	require.NoError(t, err, "a connected client that never sent the HTTP/2 preface held the stop")
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, l.Socket())
}
