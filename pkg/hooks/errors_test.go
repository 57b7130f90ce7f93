package hooks

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/grpcwire"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

func TestGRPCError_MapsEveryErrorKindToOneCode(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name string
		err  error
		want grpcwire.Code
	}{
		{"wrong payload", &pipeline.Error{Hook: "OnDefineDomain", Kind: pipeline.InvalidInput, Err: cause}, grpcwire.InvalidArgument},
		{"cannot be served", &pipeline.Error{Hook: "PreCloudInitIso", Kind: pipeline.FailedPrecondition, Err: cause}, grpcwire.FailedPrecondition},
		{"wrapped pipeline error", fmt.Errorf("x: %w", &pipeline.Error{Kind: pipeline.FailedPrecondition, Err: cause}), grpcwire.FailedPrecondition},
		{"VMI that does not decode", &vmiError{cause}, grpcwire.InvalidArgument},
		{"request that does not decode", &requestError{cause}, grpcwire.InvalidArgument},
		{"wait timed out", fmt.Errorf("waited: %w", &downwardapi.MissingError{Err: context.DeadlineExceeded}), grpcwire.DeadlineExceeded},
		{"caller went away while waiting", &downwardapi.MissingError{Err: context.Canceled}, grpcwire.Canceled},
		{"watcher closed while waiting", &downwardapi.MissingError{Err: downwardapi.ErrClosed}, grpcwire.DeadlineExceeded},
		{"context canceled", fmt.Errorf("hook: %w", context.Canceled), grpcwire.Canceled},
		{"context deadline", context.DeadlineExceeded, grpcwire.DeadlineExceeded},
		{"anything else", cause, grpcwire.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := grpcError(tt.err)
			assert.Equal(t, tt.want, grpcwire.CodeOf(got))
			assert.Equal(t, tt.err.Error(), grpcwire.FromError(got).Message, "the message is the error's own")
		})
	}
}
