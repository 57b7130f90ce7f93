// Package hooks owns the KubeVirt hook gRPC surface of the sidecar: the Info service, the v1alpha2
// and v1alpha3 Callbacks services (one shared implementation), KubeVirt v1.9's Plugin API DomainHookService
// on a socket of its own (plugin.go), the unix sockets' lifecycle, the interceptors that log each call and
// turn a panic into a gRPC error, and the sizes of a call (limits.go: what virt-launcher can send and
// receive; codec.go decodes large requests without copying them whole). It translates between wire and
// domain types only, and maps errors to gRPC codes (StatusError): the work is done by a Handler that main
// wires in (pkg/binding). It must never block Info, never let a panic escape, and never leave its socket
// behind on a clean exit. Called by cmd/sidecar (wiring) and pkg/binding (status codes, bounded log values).
package hooks
