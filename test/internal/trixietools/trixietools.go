package trixietools

import (
	"context"
	"fmt"
	"os"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// Packages are the root's debootstrap --include list:
//   - qemu-system-x86: qemu 10.0, whose -device igb (Intel 82576) has SR-IOV (qemu's
//     docs/system/devices/igb.rst); bookworm's 7.2 has no igb;
//   - libvirt-daemon and libvirt-daemon-driver-qemu: libvirtd 11.3 with the qemu driver, whose own parse
//     and validation `virsh define` runs. Debian 13 ships no modular virtqemud binary; libvirtd loads the
//     same driver module (libvirt_driver_qemu.so) that virtqemud is built from;
//   - libvirt-clients: virsh and virt-xml-validate, which needs xmllint (libxml2-utils);
//   - iproute2: ip, for the tap and bridge inside the root's network namespace when a test wants it.
var Packages = []string{
	"qemu-system-x86", "libvirt-daemon", "libvirt-daemon-driver-qemu", "libvirt-clients", "libxml2-utils", "iproute2",
}

// Spec is the root's cache spec.
func Spec() debroot.Spec {
	return debroot.Spec{Suite: "trixie", Packages: Packages, Tool: "mmdebstrap"}
}

// DefaultCacheDir is $TRIXIE_TOOLS_CACHE_DIR, else /var/cache/sriov-udn-binding/tools.
func DefaultCacheDir() string {
	if d := os.Getenv("TRIXIE_TOOLS_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/sriov-udn-binding/tools"
}

// Root is a ready trixie tools root.
type Root struct {
	Dir string
}

// Ensure returns the cached root, building it (debootstrap, a few minutes cold) when missing.
func Ensure(ctx context.Context, cacheDir string, logf func(string, ...any)) (Root, error) {
	dir, built, err := debroot.Ensure(ctx, cacheDir, Spec(), logf)
	if err != nil {
		return Root{}, fmt.Errorf("trixie tools root: %w", err)
	}
	if built {
		logf("trixie tools root built at %s", dir)
	}
	return Root{Dir: dir}, nil
}

// Unavailable says why the tools root cannot be used on this machine ("" when it can): it needs root
// (chroot, mounts) and debootstrap.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return "needs root for chroot and bind mounts"
	}
	if _, err := debroot.FindCommand("mmdebstrap"); err != nil {
		return "needs mmdebstrap (Debian package mmdebstrap) to build the trixie tools root"
	}
	if _, err := debroot.FindCommand("unshare"); err != nil {
		return "needs unshare (util-linux) for the tools' private mount namespaces"
	}
	if _, err := debroot.FindCommand("chroot"); err != nil {
		return "needs chroot (coreutils)"
	}
	return ""
}
