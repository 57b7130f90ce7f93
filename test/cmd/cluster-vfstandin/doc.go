// Command cluster-vfstandin is a test-only STAND-IN for an SR-IOV VF, for the registry-free cluster of
// test/cluster: these machines have no VFIO, no IOMMU and no PCI NIC, so no VF can be passed through.
//
// It plays the VF at the domain level. It is a KubeVirt hook sidecar, registered as a second network
// binding plugin ("vf-standin") so that KubeVirt runs it in the virt-launcher pod after ours, and it
// subscribes OnDefineDomain only. In each OnDefineDomain it finds, for every VMI interface bound to
// sriov-udn-binding, the <hostdev> our sidecar wrote (alias "ua-sriov-<iface>"), checks it against the
// device-info file KubeVirt gives the binding (source PCI address, alias, managed='no', type pci in
// subsystem mode, the VMI's pciAddress and bootOrder), and swaps it for an emulated virtio NIC
// (<interface type='ethernet'>) on the TAP device the cluster's CNI stand-in made for that network,
// with the VF's MAC and the hostdev's guest address. Everything before it (our hostdev as
// virt-launcher received it) and after it (KubeVirt's define and start) is real. A hostdev that is
// wrong, or absent, fails the call with an error that names the field: the VM then fails to start,
// and the test sees which layer failed.
//
// It is never shipped and never part of the product: test/cluster builds it into a test image.
package main
