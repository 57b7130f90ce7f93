// Package grpcwire owns the sidecar's gRPC transport: a server for unary gRPC calls over cleartext
// HTTP/2 (prior knowledge, RFC 9113) on a stream listener, the subset of gRPC that KubeVirt's hook
// clients use (virt-launcher's pkg/hooks Manager and, from v1.9, its Plugin API sidecar client: one
// request message, one response message, identity encoding, the status in trailers).
//
// It replaces google.golang.org/grpc in the binary, whose server alone is about two thirds of an idle
// sidecar's memory (issue 26: idle RSS at most half the passt sidecar's). It knows nothing of hooks:
// a Handler gets the method path and the request message's bytes and returns the response's bytes or a
// *Status. Header compression is golang.org/x/net/http2/hpack; framing, flow control, deadlines
// (grpc-timeout), cancellation (RST_STREAM), GOAWAY and the graceful stop are ours.
//
// What it must never do: buffer more of a call than the message it announced (at most MaxRecvMsgSize),
// block reading one connection on another, let a handler's panic escape, or answer a stream after the
// client reset it. Peers are the pod's own containers, reached over a unix socket; every frame they send
// is still treated as hostile (fuzzed in frame_fuzz_test.go).
package grpcwire
