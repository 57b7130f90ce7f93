package grpcwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Code is a gRPC status code (grpc/codes numbering, which travels as the grpc-status trailer).
type Code uint32

// The status codes the sidecar sends, numbered as gRPC's.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
)

var codeNames = map[Code]string{
	OK: "OK", Canceled: "Canceled", Unknown: "Unknown", InvalidArgument: "InvalidArgument",
	DeadlineExceeded: "DeadlineExceeded", ResourceExhausted: "ResourceExhausted",
	FailedPrecondition: "FailedPrecondition", Unimplemented: "Unimplemented", Internal: "Internal",
	Unavailable: "Unavailable",
}

// String names c as grpc-go does.
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Status is a call's outcome other than OK: its code and message reach the client as the grpc-status
// and grpc-message trailers.
type Status struct {
	Code    Code
	Message string
}

// Error formats s as grpc-go's status errors do, so logs read the same on both sides.
func (s *Status) Error() string {
	return fmt.Sprintf("rpc error: code = %s desc = %s", s.Code, s.Message)
}

// Error returns a *Status with code c and message msg.
func Error(c Code, msg string) error { return &Status{Code: c, Message: msg} }

// Errorf returns a *Status with code c and a formatted message.
func Errorf(c Code, format string, args ...any) error {
	return &Status{Code: c, Message: fmt.Sprintf(format, args...)}
}

// FromError is the status the client gets for err: the *Status in err's chain; for a context error,
// Canceled or DeadlineExceeded; for anything else, Unknown with err's text. nil is OK.
func FromError(err error) *Status {
	if err == nil {
		return &Status{Code: OK}
	}
	var s *Status
	switch {
	case errors.As(err, &s):
		return s
	case errors.Is(err, context.DeadlineExceeded):
		return &Status{Code: DeadlineExceeded, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &Status{Code: Canceled, Message: err.Error()}
	}
	return &Status{Code: Unknown, Message: err.Error()}
}

// CodeOf is FromError(err).Code.
func CodeOf(err error) Code { return FromError(err).Code }

// encodeMessage percent-encodes a grpc-message value: every byte outside printable ASCII, and '%'
// (gRPC over HTTP/2, "Responses": Status-Message).
func encodeMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(msg) + 16)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
