package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// recoverInterceptor turns a panic in any handler into a gRPC Internal error: the pod has
// restartPolicy Never, so a crashed sidecar is never restarted and the VM would fail.
func recoverInterceptor(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				logger.Error("panic in hook call", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				resp, err = nil, status.Errorf(codes.Internal, "%s: internal error: %v", path.Base(info.FullMethod), r)
			}
		}()
		return handler(ctx, req)
	}
}

// logInterceptor writes one line per call. The outcome is what the client got: a call whose context
// ended (deadline passed, client gone) is reported as such, and returns the context's status even when
// the handler finished without error, since virt-launcher has stopped waiting for it. It also marks the
// call as served, for the refusal log (refusedLogger).
func logInterceptor(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		markServed(ctx)
		start := time.Now()
		resp, err := handler(ctx, req)
		attrs := []any{"hook", path.Base(info.FullMethod), "service", path.Dir(info.FullMethod), "duration", time.Since(start)}
		ctxErr := ctx.Err()
		if ctxErr != nil && err == nil {
			resp, err = nil, status.FromContextError(ctxErr).Err()
		}
		switch {
		case errors.Is(ctxErr, context.DeadlineExceeded):
			attrs = append(attrs, "outcome", "deadline exceeded")
		case ctxErr != nil:
			attrs = append(attrs, "outcome", "canceled")
		case err != nil:
			attrs = append(attrs, "outcome", "error")
		default:
			logger.Info("hook call", append(attrs, "outcome", "ok")...)
			return resp, nil
		}
		logger.Warn("hook call", append(attrs, "error", err)...)
		return resp, err
	}
}

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
