// Package debroot builds and caches Debian root directories with debootstrap, for the tests that need
// a newer Debian's tools than the host's (trixie's qemu 10, libvirt 11.3 and cloud-init 25.1.4 on a
// bookworm host) or a guest image's root. It owns the cache entry (keyed by the spec, built under a flock,
// renamed into place only when complete) and the small process helpers those builds share. It never runs
// anything inside a root: callers chroot into it themselves. Called by test/guest and the tests that run
// tools from a trixie root.
package debroot
