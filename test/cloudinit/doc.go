// Package cloudinit tests the sidecar's PreCloudInitIso answers (pkg/pipeline, pkg/cloudinit) against
// KubeVirt's own code: inputs made by virt-launcher's ReadCloudInitVolumeDataSource, answers judged by its
// IsValidCloudInitData, the check behind which the hook Manager would read a legacy CloudInitNoCloudSource
// the sidecar does not send. It holds tests only.
package cloudinit
