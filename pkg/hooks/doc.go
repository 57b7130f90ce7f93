// Package hooks owns the sidecar's gRPC transport, on grpc-go with KubeVirt's generated hook types: the Info
// method, the v1alpha2 and v1alpha3 Callbacks (one shared implementation), KubeVirt v1.9's Plugin API
// DomainHookService on a socket of its own (plugin.go, pluginv1alpha1), the unix sockets' lifecycle, and the
// limits a possibly hostile peer meets (limits.go, the process-wide request budget in budget.go, the decode
// limit in codec.go). It translates between KubeVirt's messages and the Handler's bytes only: what an error
// means, and its gRPC code, is the Handler's (pkg/binding). It must never block Info, never let a panic
// escape, and never leave its socket behind on a clean exit. Called by cmd/sidecar only (wiring). It sits on
// top: the handler package implements its Handler without importing it (cmd/sidecar imports_test.go).
package hooks
