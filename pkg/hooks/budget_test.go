package hooks

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
