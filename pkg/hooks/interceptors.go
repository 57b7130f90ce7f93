package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
// call as served, for the refusal log (refused.go).
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
