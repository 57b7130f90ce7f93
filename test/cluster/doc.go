// Package cluster runs a registry-free single-node Kubernetes cluster on this machine, for the tests that need
// the whole stack for real: etcd and containerd from a Debian trixie root, kubelet and the control
// plane built from k8s.io/kubernetes v1.34.2 (module test/cluster/kubernetes), KubeVirt v1.8.4 built from the module
// cache and deployed by its own operator, images written as docker archives and imported with ctr. The node is not a container but a set of namespaces of this host: its own PID namespace
// (PID 1 is the node's init, as virt-handler expects of /proc/1), mount namespace (private /run, /var/log and
// /var/lib, so that kubelet's and containerd's fixed paths never touch the host's) and network namespace (a veth
// holds the node address), with a PKI of its own. It owns the node's life: bring-up, readiness, and a teardown
// that leaves no process, mount, cgroup, host path or sysctl of the host changed, checked after every run.
//
// What it cannot hold here, and what stands in for it, is said where the stand-ins are: test/cmd/cluster-cni
// (Multus and OVN-Kubernetes) and test/cmd/cluster-vfstandin (the VF). Called by its own tests (make
// test-cluster), which need root.
package cluster
