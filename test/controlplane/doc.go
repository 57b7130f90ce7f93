// Package controlplane tests manifests/ against a real control plane: a kube-apiserver (cmd/kube-apiserver
// of k8s.io/kubernetes v1.34.2, this module's `tool`, run as a child process with only the feature gate and
// API version that docs/install.md tells users to enable; `make test-controlplane` builds it once for
// every KubeVirt version) on an etcd embedded in the test (go.etcd.io/etcd/server/v3), with the real KubeVirt and
// NetworkAttachmentDefinition CRDs. The manifests are applied with kubectl's own apply code, exactly as
// docs/install.md says; the virt-launcher pod is rendered by KubeVirt's virt-controller template service and
// created through the API server, so the admission policies are compiled and enforced by the server itself.
//
// It is its own Go module because it needs k8s.io/kubernetes and kubevirt.io/kubevirt with their replace
// pins (DESIGN.md section 6): test/manifests stays a small module that builds in seconds.
package controlplane
