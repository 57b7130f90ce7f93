package hooks

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The log line never says ok for a call whose client's deadline passed, even when the
// handler itself returned no error.
func TestLogCall_DeadlinePassedDuringCall_LogsNotOK(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	handler := func(context.Context, any) (any, error) {
		cancel() // the client gives up while the handler works; the handler ignores it
		return "result", nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/kubevirt.hooks.v1alpha3.Callbacks/PreCloudInitIso"}
	_, err := logInterceptor(logger)(ctx, nil, info, handler)
	assert.Equal(t, codes.Canceled, status.Code(err), "the client got no result: %v", err)
	line := logs.String()
	assert.NotContains(t, line, `"outcome":"ok"`)
	assert.True(t, strings.Contains(line, `"outcome":"canceled"`), line)
}
