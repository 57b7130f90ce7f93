// Package trixietools owns the cached Debian trixie root that holds the tools this bookworm machine
// lacks (qemu 10 with -device igb, libvirt 11.3's virtqemud, virsh and virt-xml-validate) and runs them
// in it with chroot, with /proc, /sys and /dev bound in and unmounted again. It never builds anything but
// that root (test/internal/debroot does the build and the caching) and never touches the host's own
// tools. Called by test/libvirt and the VF scenarios of test/guest.
package trixietools
