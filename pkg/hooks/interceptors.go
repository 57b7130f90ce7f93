package hooks

import (
	"context"
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

// logInterceptor writes one line per call: method, version, duration and outcome.
func logInterceptor(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		attrs := []any{
			"hook", path.Base(info.FullMethod),
			"service", path.Dir(info.FullMethod),
			"duration", time.Since(start),
		}
		if err != nil {
			logger.Warn("hook call", append(attrs, "outcome", "error", "error", boundedError(err))...)
		} else {
			logger.Info("hook call", append(attrs, "outcome", "ok")...)
		}
		return resp, err
	}
}
