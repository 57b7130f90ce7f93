// Package harness runs the built sidecar binary the way a virt-launcher pod does, for the
// integration and guest tests: it builds the binary, starts it with a socket under KubeVirt's hook
// root, serialises tests that use KubeVirt's singleton hook Manager (it scans every socket under
// /var/run/kubevirt-hooks), and writes DownwardAPI volumes with kubelet's own AtomicWriter.
// It never talks to a cluster. Called by test/integration and test/guest.
package harness
