// Package hooks owns the KubeVirt hook gRPC surface of the sidecar: the Info method, the v1alpha2 and
// v1alpha3 Callbacks methods (one shared implementation), KubeVirt v1.9's Plugin API DomainHookService on
// a socket of its own (plugin.go), their wire messages (wire.go, read and written with protowire; large
// requests are copied out at their own size, the legacy echo skipped), the unix sockets' lifecycle, the
// wrappers that log each call and turn a panic into a gRPC error, and the sizes of a call (limits.go:
// what virt-launcher can send and receive). The transport underneath is grpcwire. It translates between
// wire and domain types only, and maps errors to gRPC codes (StatusError): the work is done by a Handler
// that main wires in (pkg/binding). It must never block Info, never let a panic escape, and never leave
// its socket behind on a clean exit. Called by cmd/sidecar (wiring) and pkg/binding (status codes,
// bounded log values).
package hooks
