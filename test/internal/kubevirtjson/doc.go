// Package kubevirtjson hands values built with KubeVirt's own types (kubevirt.io/api) to the
// sidecar's mirror types the way the wire does: marshalled to JSON by KubeVirt's types, decoded by
// ours. Tests use it so that every test built on KubeVirt types also exercises the mirror.
package kubevirtjson
