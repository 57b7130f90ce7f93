package hooks

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/grpcwire"
)

// Issue 15 case 2: the log line never says ok for a call whose client's deadline passed, even when the
// handler itself returned no error.
func TestLogCall_DeadlinePassedDuringCall_LogsNotOK(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	handler := func(context.Context, []byte) ([]byte, error) {
		cancel() // the client gives up while the handler works; the handler ignores it
		return []byte("result"), nil
	}
	_, err := logCall(logger, methodV3PreCloudInitIso, handler)(ctx, nil)
	assert.Equal(t, grpcwire.Canceled, grpcwire.CodeOf(err), "the client got no result: %v", err)
	line := logs.String()
	assert.NotContains(t, line, `"outcome":"ok"`)
	assert.True(t, strings.Contains(line, `"outcome":"canceled"`), line)
}
