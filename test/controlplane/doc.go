// Package controlplane tests manifests/ against a real control plane, once per Kubernetes release users run:
// kube-apiserver 1.34.2 (test/cluster/kubernetes' `tool`, the build the cluster runs), started with only
// the feature gate and API version docs/install.md tells users of 1.34/1.35 to enable, and 1.36.3 (the module
// kube-apiserver-v1.36 beside this one) at its defaults; each runs as a child process on an etcd embedded in
// the test (go.etcd.io/etcd/server/v3), with the real KubeVirt and NetworkAttachmentDefinition CRDs;
// `make test-controlplane` builds each server once for every KubeVirt version. The shell blocks of
// docs/install.md run as written, with kubectl's own binary; the other steps use kubectl's apply code; the
// virt-launcher pod is rendered by KubeVirt's virt-controller template service and created through the API
// server, so the admission policies are compiled and enforced by the server itself. The docs' other blocks
// are tested here too (docs_test.go, `make test-docs`).
//
// It is a package of the test/ module, whose replace pins make k8s.io/kubernetes and kubevirt.io/kubevirt
// importable (docs/development.md "Layout").
package controlplane
