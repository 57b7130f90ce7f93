// Package pluginv1alpha1 owns the generated wire types and gRPC service descriptor of KubeVirt's Plugin API
// domain hook (VEP-190, kubevirt.io/kubevirt v1.9.0 pkg/hooks/plugins/v1alpha1), generated from api.proto
// with protoc-gen-go and protoc-gen-go-grpc (`make generate`). It is generated here rather than imported
// because KubeVirt's package needs kubevirt.io/kubevirt v1.9.0 with its staging replaces in this module and
// links kubevirt.io/api/core/v1 and pkg/util/net/grpc: a blank import alone makes a binary larger than the
// whole sidecar (docs/footprint.md "Figures behind the code"). It holds no logic: pkg/hooks serves it.
// Called by pkg/hooks only.
package pluginv1alpha1
