package binding

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

func TestStatusError_MapsEveryErrorKindToOneCode(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"wrong payload", &pipeline.Error{Hook: "OnDefineDomain", Kind: pipeline.InvalidInput, Err: cause}, codes.InvalidArgument},
		{"cannot be served", &pipeline.Error{Hook: "PreCloudInitIso", Kind: pipeline.FailedPrecondition, Err: cause}, codes.FailedPrecondition},
		{"wrapped pipeline error", fmt.Errorf("x: %w", &pipeline.Error{Kind: pipeline.FailedPrecondition, Err: cause}), codes.FailedPrecondition},
		{"VMI that does not decode", &vmiError{cause}, codes.InvalidArgument},
		{"wait timed out", fmt.Errorf("waited: %w", &downwardapi.MissingError{Err: context.DeadlineExceeded}), codes.DeadlineExceeded},
		{"caller went away while waiting", &downwardapi.MissingError{Err: context.Canceled}, codes.Canceled},
		{"watcher closed while waiting", &downwardapi.MissingError{Err: downwardapi.ErrClosed}, codes.DeadlineExceeded},
		{"context canceled", fmt.Errorf("hook: %w", context.Canceled), codes.Canceled},
		{"context deadline", context.DeadlineExceeded, codes.DeadlineExceeded},
		{"anything else", cause, codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statusError(tt.err)
			assert.Equal(t, tt.want, status.Code(got))
			assert.Equal(t, tt.err.Error(), status.Convert(got).Message(), "the message is the error's own")
		})
	}
}
