// Package requestpb owns the generated message the sidecar decodes KubeVirt's PreCloudInitIsoParams into
// (request.proto): its vmi and cloudInitData, without the legacy cloudInitNoCloudSource copy. It holds no
// logic. Called by pkg/hooks only.
package requestpb
