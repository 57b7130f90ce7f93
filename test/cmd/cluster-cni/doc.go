// Command cluster-cni is a stand-in for Multus and OVN-Kubernetes, test-only. It is a CNI 1.0.0 plugin for the
// registry-free single-node cluster (DESIGN.md section 4e), where neither Multus nor OVN-Kubernetes can run, and
// writes on each pod exactly the annotations the sidecar reads from them:
//
//   - k8s.v1.cni.cncf.io/network-status, as Multus writes it (with the SR-IOV CNI's device-info), and
//   - k8s.ovn.org/pod-networks, as OVN-Kubernetes' ovnkube-controller writes it.
//
// On ADD it reads the pod (CNI_ARGS K8S_POD_NAMESPACE, K8S_POD_NAME) with client-go, runs the Debian `bridge`
// plugin with `host-local` IPAM for the pod network (dual-stack), and for each network of the pod's
// k8s.v1.cni.cncf.io/networks annotation reads its NetworkAttachmentDefinition. A NAD of type `sriov` gets a TAP
// device in the pod's netns standing in for the VF ("vf" + 11 hex digits of sha256(pod interface name), owned
// by qemu, uid/gid 107) and v4/v6 addresses from host-local; a NAD of type `bridge` gets a veth on the NAD's node
// bridge from the Debian `bridge` plugin, without addresses (KubeVirt's bridge binding); a `none` one is left out;
// any other type gets no device and no address but is still listed. It then merge-patches both annotations onto
// the pod. DEL undoes what ADD recorded in dataDir; CHECK and VERSION follow the CNI spec.
//
// `cluster-cni hotplug <conflist>` is the stand-in for Multus' dynamic networks controller: a process the node
// runs beside kubelet, which attaches a bridge network added to a running pod's networks annotation and
// publishes it in network-status (Hotplug), as KubeVirt's NIC hot-plug needs.
//
// It is never shipped: nothing outside test/ may depend on it.
package main
