// Command cloudinit-root prints the directory of a cached Debian root holding cloud-init, building it first
// (test/internal/debroot) when it is missing: `make test-netconvert` runs the sidecar's net-convert harness
// (pkg/cloudinit/netconvert_test.go) in it with chroot, so cloud-init 25.1.4 (trixie) is checked beside the
// host's 22.4.2 (bookworm). It owns nothing but that call; it never runs anything inside the root.
package main
