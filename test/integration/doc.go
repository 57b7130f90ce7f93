// Package integration drives the built sidecar binary with KubeVirt's own hook Manager
// (kubevirt.io/kubevirt/pkg/hooks), exactly as virt-launcher calls it, with DownwardAPI volumes
// written by kubelet's own AtomicWriter. It needs root (the Manager is fixed to /var/run/kubevirt-hooks).
package integration
