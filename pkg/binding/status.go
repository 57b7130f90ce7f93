package binding

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// vmiError is a VMI payload from virt-launcher that does not decode.
type vmiError struct{ err error }

func (e *vmiError) Error() string { return "VMI from virt-launcher: " + e.err.Error() }
func (e *vmiError) Unwrap() error { return e.err }

// statusError is the gRPC status virt-launcher gets (and logs) for a failed hook: the code from codeOf,
// the error's own message (the pipeline's, which `render` prints too). Every hook returns its failures
// through it.
func statusError(err error) error {
	return status.Error(codeOf(err), err.Error())
}

// codeOf is the one map from error kinds to gRPC codes:
//   - a pipeline.Error: InvalidArgument for a wrong payload (VMI, domain XML, cloud-init data), else
//     FailedPrecondition (the payloads are fine, what they and the annotations say cannot be served);
//   - a VMI that does not decode: InvalidArgument;
//   - data still missing when the wait ends (downwardapi.MissingError): Canceled when the caller went
//     away, else DeadlineExceeded (the wait timeout, or the watcher closed under it);
//   - a context that ended: Canceled or DeadlineExceeded, as status.FromContextError says;
//   - anything else (a bug): Internal.
func codeOf(err error) codes.Code {
	var (
		pe      *pipeline.Error
		bad     *vmiError
		missing *downwardapi.MissingError
	)
	switch {
	case errors.As(err, &pe):
		if pe.Kind == pipeline.InvalidInput {
			return codes.InvalidArgument
		}
		return codes.FailedPrecondition
	case errors.As(err, &bad):
		return codes.InvalidArgument
	case errors.As(err, &missing):
		if errors.Is(err, context.Canceled) {
			return codes.Canceled
		}
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Code()
	}
	return codes.Internal
}
