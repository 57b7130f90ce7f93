// Package e2e is the kind end-to-end test (build tag e2e, `make e2e`): it creates a cluster, installs
// KubeVirt, Multus and our manifests, boots a VM through the sriov-udn binding and checks the sidecar's
// logs, the cloud-init disk and vmi.status.interfaces. It drives only docker, kind and kubectl through
// os/exec and never runs without the e2e tag; the ISO reader it uses is untagged and unit-tested.
package e2e
