package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"runtime/debug"
	"time"
)

// method is one served gRPC method: it decodes its request message, runs the hook and encodes the answer.
type method func(ctx context.Context, req []byte) ([]byte, error)

// recoverCall turns a panic in a method into an Internal error: the pod has restartPolicy Never, so a
// crashed sidecar is never restarted and the VM would fail.
func recoverCall(logger *slog.Logger, fullMethod string, next method) method {
	return func(ctx context.Context, req []byte) (resp []byte, err error) {
		defer func() {
			if r := recover(); r != nil {
				logger.Error("panic in hook call", "method", fullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				resp, err = nil, grpcError(fmt.Errorf("%s: internal error: %v", path.Base(fullMethod), r))
			}
		}()
		return next(ctx, req)
	}
}

// logCall writes one line per call: method, version, duration and outcome. The outcome is what the
// client got: a call whose context ended (deadline passed, client gone) is reported as such, and
// returns the context's status even when the handler finished without error, since virt-launcher has
// stopped waiting for it (issue 15: a handler that ran 9.6 s past a 2 s deadline logged "ok").
func logCall(logger *slog.Logger, fullMethod string, next method) method {
	return func(ctx context.Context, req []byte) ([]byte, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		attrs := []any{
			"hook", path.Base(fullMethod),
			"service", path.Dir(fullMethod),
			"duration", time.Since(start),
		}
		outcome := "ok"
		if ctxErr := ctx.Err(); ctxErr != nil {
			outcome = "canceled"
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				outcome = "deadline exceeded"
			}
			if err == nil {
				resp, err = nil, grpcError(ctxErr)
			}
		} else if err != nil {
			outcome = "error"
		}
		if err != nil {
			logger.Warn("hook call", append(attrs, "outcome", outcome, "error", boundedError(err))...)
		} else {
			logger.Info("hook call", append(attrs, "outcome", outcome)...)
		}
		return resp, err
	}
}
