// Package harness runs the built sidecar binary the way a virt-launcher pod does: it builds the binary, lays
// out the pod on disk (Pod: the hooks directory with the socket and interface cache, the pod-info and
// device-info DownwardAPI volumes written with kubelet's own AtomicWriter, Volume) and starts the sidecar on
// it (Process), serialises tests that use KubeVirt's singleton hook Manager (it scans every socket under
// /var/run/kubevirt-hooks), and holds the sample pod and VMI (cmd/sidecar/samples). It never talks to a
// cluster. Called by test/integration, faults, container, hostile, libvirt, guest, downwardapi,
// cmd/cluster-vfstandin, bench/cmd/sidecarbench and test/plugin.
package harness
