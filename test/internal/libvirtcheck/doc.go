// Package libvirtcheck runs libvirt's own checks on a domain XML: the RNG schema (virt-xml-validate) on the
// elements the sidecar writes, spliced into a minimal valid domain, and the qemu driver's parse and
// validation (`virsh define --validate` against a libvirtd of its own, never starting the domain). The
// tools come from the trixie tools root (test/internal/trixietools). It decides nothing about what a
// domain should hold: callers assert that. Called by test/libvirt and the guest scenarios.
package libvirtcheck
