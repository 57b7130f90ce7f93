// Package libvirt runs libvirt's own checks on every domain the sidecar produces: the RNG schema
// (virt-xml-validate) on its elements and the qemu driver's parse and validation (`virsh define
// --validate` against a private libvirtd 11.3 from the trixie tools root), on domains KubeVirt's converter
// builds and pkg/domain changes, and on the domains test/integration and test/guest recorded from the
// built sidecar through KubeVirt's hook Manager. It holds tests only; run by `make test-libvirt`.
package libvirt
