package hooks

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
)

// A stream that has ended gives its share back to the next stream that needs it, even before its release has
// run: grpc-go closes a connection's socket before it cancels the connection's streams, so a peer can call again
// first (seen as a refused Info right after a hostile peer's connection was closed, test/hostile).
func TestBudget_TheShareOfAnEndedStreamIsTakenBackBeforeItsReleaseRuns(t *testing.T) {
	b := NewBudget(DefaultLimits(), slog.New(slog.DiscardHandler))
	info := &tap.Info{FullMethodName: "/kubevirt.hooks.v1alpha3.Callbacks/PreCloudInitIso"}
	ended, end := context.WithCancel(context.Background())
	// A stream holding the whole budget, registered as tap registers one, whose release has not run yet.
	r := &reservation{b: b, method: info.FullMethodName, ctx: ended, timer: time.NewTimer(time.Hour), n: b.limit}
	b.mu.Lock()
	b.live[r] = struct{}{}
	b.held = r.n
	b.mu.Unlock()

	_, err := b.tap(context.Background(), info)
	require.Error(t, err, "the stream is alive: its share is its own")
	end()
	_, err = b.tap(context.Background(), info)
	require.NoError(t, err, "the stream has ended: its share is taken back")
	assert.Equal(t, b.reserve, b.Held())
	r.release() // late: changes nothing
	assert.Equal(t, b.reserve, b.Held())
}

// A connection that closes gives its streams' shares back before its socket closes: grpc-go cancels the streams
// only after it has closed the socket (http2Server.Close), and a peer that sees the close may call at once.
func TestBudget_AClosingConnectionGivesItsStreamsSharesBackFirst(t *testing.T) {
	b := NewBudget(DefaultLimits(), slog.New(slog.DiscardHandler))
	info := &tap.Info{FullMethodName: "/kubevirt.hooks.v1alpha3.Callbacks/PreCloudInitIso"}
	server, client := net.Pipe()
	defer func() { _ = client.Close() }()
	conn := &limitedConn{Conn: server, release: func() {}, streams: map[*reservation]struct{}{}}
	_, auth, err := newConnCredentials().ServerHandshake(conn)
	require.NoError(t, err)
	assert.Equal(t, "insecure", auth.AuthType())
	// The stream's context, as grpc-go makes it: the connection's peer, and no end of its own yet.
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: auth})

	_, err = b.tap(ctx, info)
	require.NoError(t, err)
	require.Equal(t, b.reserve, b.Held())
	require.NoError(t, conn.Close())
	assert.Zero(t, b.Held(), "given back by the connection's Close, before the stream's context ends")

	_, err = b.tap(ctx, info) // headers read after the close: the stream is ending, and holds nothing
	require.NoError(t, err)
	assert.Zero(t, b.Held())
}
