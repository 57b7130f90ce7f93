package hooks

import (
	"context"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// refusedLogger is a gRPC stats handler that logs the calls refused before any interceptor ran: a request
// past gRPC's receive limit or the codec's decode limit, one that did not arrive in time, one whose client
// went away. virt-launcher gets the status; the sidecar's log says which hook and why. A peer can cause
// refusals much faster than anyone reads logs, so at most one line a second is written, with the count of
// those left out since the last one.
type refusedLogger struct {
	log *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// rpcTag is what TagRPC puts in a call's context: its method, and whether it reached the interceptors.
type rpcTag struct {
	method string
	served atomic.Bool
}

type rpcTagKey struct{}

// markServed records that a call reached the interceptors (the ctx is the one TagRPC returned).
func markServed(ctx context.Context) {
	if tag, ok := ctx.Value(rpcTagKey{}).(*rpcTag); ok {
		tag.served.Store(true)
	}
}

func (h *refusedLogger) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcTagKey{}, &rpcTag{method: info.FullMethodName})
}

func (h *refusedLogger) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	tag, ok := ctx.Value(rpcTagKey{}).(*rpcTag)
	if !ok || tag.served.Load() {
		return // the interceptors logged it
	}
	attrs := []any{"hook", path.Base(tag.method), "service", path.Dir(tag.method), "code", status.Code(end.Error).String(), "error", end.Error}
	if status.Code(end.Error) == codes.Canceled {
		h.log.Debug("hook call ended by the client before its request arrived", attrs...)
		return
	}
	h.mu.Lock()
	now := time.Now()
	if now.Sub(h.last) < time.Second {
		h.suppressed++
		h.mu.Unlock()
		return
	}
	if h.suppressed > 0 {
		attrs = append(attrs, "suppressedSinceLast", h.suppressed)
	}
	h.last, h.suppressed = now, 0
	h.mu.Unlock()
	h.log.Warn("hook call refused", attrs...)
}

func (h *refusedLogger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (h *refusedLogger) HandleConn(context.Context, stats.ConnStats) {}
