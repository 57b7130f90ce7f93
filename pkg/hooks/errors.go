package hooks

import (
	"context"
	"errors"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/grpcwire"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// vmiError is a VMI payload from virt-launcher that does not decode.
type vmiError struct{ err error }

func (e *vmiError) Error() string { return "VMI from virt-launcher: " + e.err.Error() }
func (e *vmiError) Unwrap() error { return e.err }

// requestError is a request message from virt-launcher that does not decode as its protobuf type.
type requestError struct{ err error }

func (e *requestError) Error() string { return "request from virt-launcher: " + e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// InvalidVMI marks err as a VMI payload from virt-launcher that does not decode: StatusError maps it to
// InvalidArgument.
func InvalidVMI(err error) error { return &vmiError{err} }

// StatusError is the gRPC status a Handler returns for a failed hook (see grpcError).
func StatusError(err error) error { return grpcError(err) }

// grpcError is the gRPC status virt-launcher gets (and logs) for a failed hook: code from codeOf, the
// error's own message (the pipeline's, which `render` prints too). Every handler and interceptor
// returns its failures through it.
func grpcError(err error) error {
	return grpcwire.Error(codeOf(err), err.Error())
}

// codeOf is the one map from error kinds to gRPC codes:
//   - a pipeline.Error: InvalidArgument for a wrong payload (VMI, domain XML, cloud-init data), else
//     FailedPrecondition (the payloads are fine, what they and the annotations say cannot be served);
//   - a VMI or a request message that does not decode: InvalidArgument;
//   - data still missing when the wait ends (downwardapi.MissingError): Canceled when the caller went
//     away, else DeadlineExceeded (the wait timeout, or the watcher closed under it);
//   - a context that ended: Canceled or DeadlineExceeded, as status.FromContextError says;
//   - anything else (a panic, a bug): Internal.
func codeOf(err error) grpcwire.Code {
	var (
		pe      *pipeline.Error
		bad     *vmiError
		badReq  *requestError
		missing *downwardapi.MissingError
	)
	switch {
	case errors.As(err, &pe):
		if pe.Kind == pipeline.InvalidInput {
			return grpcwire.InvalidArgument
		}
		return grpcwire.FailedPrecondition
	case errors.As(err, &bad), errors.As(err, &badReq):
		return grpcwire.InvalidArgument
	case errors.As(err, &missing):
		if errors.Is(err, context.Canceled) {
			return grpcwire.Canceled
		}
		return grpcwire.DeadlineExceeded
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return grpcwire.CodeOf(err)
	}
	return grpcwire.Internal
}
