package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// ImageSpec is everything that decides the guest image's content; its Key names the cache entry,
// so changing any of it rebuilds the image.
type ImageSpec struct {
	Suite  string
	Mirror string
	// Packages are debootstrap --include'd on top of --variant=minbase. python3-cffi-backend must
	// be named: without it cloud-init fails to configure in a minbase root.
	Packages []string
	// CloudCfg is written to /etc/cloud/cloud.cfg.d/99-guest-test.cfg.
	CloudCfg string
	// Files are written into the root (path relative to it -> content; mode 0755 when the path is
	// under usr/local/sbin, else 0644); Links are symlinks (path -> target).
	Files   map[string]string
	Links   map[string]string
	SizeMiB int
}

// imageLayoutVersion changes when the build steps below change in a way the spec does not show.
// 2: the initramfs is generated again after Files are written (initramfsConf).
const imageLayoutVersion = "2"

// GuestImage is one guest of the matrix (docs/guests.md "Tested guests" lists it): the name the log's
// table shows, the image, and the renderer cloud-init uses in it, which decides how checks read the network.
type GuestImage struct {
	Name string
	Spec ImageSpec
	// NetworkManager says cloud-init renders to NetworkManager keyfiles: the checks read nmcli besides ip.
	NetworkManager bool
}

// guestPackages are the packages every guest has, on top of its renderer's.
var guestPackages = []string{
	"systemd", "systemd-sysv", "udev", "linux-image-cloud-amd64", "cloud-init", "python3-cffi-backend", "iproute2",
}

// baseCloudCfg: the datasource list is what KubeVirt can give a guest; it keeps ds-identify from probing
// clouds that are not there. The minbase root has no update-locale, so cc_locale would report an error on
// every boot that has nothing to do with networking.
const baseCloudCfg = "datasource_list: [ NoCloud, ConfigDrive, None ]\nlocale: false\n"

// nmCloudCfg makes cloud-init render and activate through NetworkManager, as RHEL's cloud.cfg does
// (system_info.network.renderers; RHEL 9/10 list sysconfig first and fall back to network-manager when
// the initscripts are absent, which they are by default: cloudinit/net/sysconfig.py available()).
const nmCloudCfg = baseCloudCfg + "system_info:\n  network:\n    renderers: [ network-manager ]\n    activators: [ network-manager ]\n"

// ImageMatrix is every guest the boot test runs: the floor (Debian 12, cloud-init 22.4.2, netplan ->
// networkd), Debian 13 with cloud-init 25.1.4 and netplan (cloud-init's first choice on Debian:
// system_info.network.renderers in its cloud.cfg), and Debian 13 with NetworkManager standing in for the
// RHEL family. trixie's minbase lacks e2fsprogs (bookworm's has it), whose resize2fs cloud-init's
// resizefs module runs at every boot: without it cloud-init reports an error that is not ours.
func ImageMatrix() []GuestImage {
	return []GuestImage{
		{Name: "debian12-ci22-netplan-networkd", Spec: DefaultImageSpec()},
		{Name: "debian13-ci25-netplan-networkd", Spec: imageSpec("trixie", baseCloudCfg, "e2fsprogs", "netplan.io")},
		// dbus: NetworkManager and nmcli talk over it (minbase has none).
		{Name: "debian13-ci25-networkmanager", Spec: imageSpec("trixie", nmCloudCfg, "e2fsprogs", "network-manager", "dbus"), NetworkManager: true},
	}
}

// DefaultImageSpec is the Debian 12 guest: cloud-init 22.4.2 (the project's compatibility floor)
// rendering through netplan to systemd-networkd.
func DefaultImageSpec() ImageSpec {
	return imageSpec("bookworm", baseCloudCfg, "netplan.io")
}

// imageSpec is a guest of suite with cloudCfg and the extra packages (its renderer's, and what its
// minbase lacks) on top of guestPackages.
func imageSpec(suite, cloudCfg string, extra ...string) ImageSpec {
	mirror := os.Getenv("GUEST_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	return ImageSpec{
		Suite:    suite,
		Mirror:   mirror,
		Packages: append(append([]string(nil), guestPackages...), extra...),
		CloudCfg: cloudCfg,
		// The report comes from a unit of the image, not from the user data, so that every user-data
		// format (none included) can be tested, on every boot, after cloud-init's final stage.
		Files: map[string]string{
			"usr/local/sbin/guest-report":             reportScript,
			"etc/systemd/system/guest-report.service": reportUnit,
			initramfsConf:    "MODULES=list\n",
			initramfsModules: initramfsModuleList,
		},
		Links: map[string]string{
			"etc/systemd/system/multi-user.target.wants/guest-report.service": "/etc/systemd/system/guest-report.service",
		},
		SizeMiB: 2048,
	}
}

// The guest's initramfs holds only what mounts its root (a virtio disk, ext4; with their dependencies),
// instead of Debian's MODULES=most: the kernel unpacks the initramfs and its udev coldplugs it at every
// boot, and under TCG the most-initramfs (190 modules; 130 MB unpacked with linux-image-amd64) cost a boot
// about 6 of its 71 CPU-seconds. Every other module still loads from the root as before.
const (
	initramfsConf       = "etc/initramfs-tools/conf.d/guest-test.conf"
	initramfsModules    = "etc/initramfs-tools/modules"
	initramfsModuleList = "virtio_pci\nvirtio_blk\next4\n"
)

// Key is a short hash of the spec.
func (s ImageSpec) Key() string {
	pkgs := append([]string(nil), s.Packages...)
	sort.Strings(pkgs)
	h := sha256.New()
	fmt.Fprintf(h, "layout=%s\nsuite=%s\nmirror=%s\npackages=%s\nsize=%d\ncloudcfg=%s",
		imageLayoutVersion, s.Suite, s.Mirror, strings.Join(pkgs, ","), s.SizeMiB, s.CloudCfg)
	for _, m := range []map[string]string{s.Files, s.Links} {
		for _, k := range sortedKeys(m) {
			fmt.Fprintf(h, "\n%s=%q", k, m[k])
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Image is a built guest: a raw ext4 root and the kernel and initrd taken from it.
type Image struct {
	Dir    string
	Root   string
	Kernel string
	Initrd string
}

func imageIn(dir string) Image {
	return Image{
		Dir:    dir,
		Root:   filepath.Join(dir, "root.img"),
		Kernel: filepath.Join(dir, "vmlinuz"),
		Initrd: filepath.Join(dir, "initrd.img"),
	}
}

// complete says whether every file of the image is there (the build renames the directory into
// place only when done, so a present directory is a finished one; the check guards against
// someone deleting files by hand).
func (i Image) complete() bool {
	for _, f := range []string{i.Root, i.Kernel, i.Initrd} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			return false
		}
	}
	return true
}

// EnsureImage returns the cached image for spec under cacheDir, building it first when it is
// missing. An exclusive flock on <cacheDir>/<key>.lock keeps concurrent runs from building twice.
// built says whether this call built it. logf receives progress lines.
func EnsureImage(ctx context.Context, cacheDir string, spec ImageSpec, logf func(string, ...any)) (img Image, built bool, err error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return Image{}, false, fmt.Errorf("create guest cache dir %s: %w", cacheDir, err)
	}
	key := spec.Key()
	img = imageIn(filepath.Join(cacheDir, key))

	unlock, err := debroot.Lock(filepath.Join(cacheDir, key+".lock"))
	if err != nil {
		return Image{}, false, err
	}
	defer unlock()

	if img.complete() {
		return img, false, nil
	}
	if err := os.RemoveAll(img.Dir); err != nil {
		return Image{}, false, fmt.Errorf("remove incomplete image %s: %w", img.Dir, err)
	}
	work, err := os.MkdirTemp(cacheDir, key+".build-")
	if err != nil {
		return Image{}, false, fmt.Errorf("create image build dir: %w", err)
	}
	defer func() {
		debroot.UnmountUnder(work)
		_ = os.RemoveAll(work)
	}()
	if err := buildImage(ctx, work, spec, logf); err != nil {
		return Image{}, false, err
	}
	if err := os.RemoveAll(filepath.Join(work, "rootfs")); err != nil {
		return Image{}, false, fmt.Errorf("remove build rootfs: %w", err)
	}
	if err := os.Rename(work, img.Dir); err != nil {
		return Image{}, false, fmt.Errorf("move image into cache: %w", err)
	}
	return img, true, nil
}

func buildImage(ctx context.Context, work string, spec ImageSpec, logf func(string, ...any)) error {
	rootfs := filepath.Join(work, "rootfs")
	start := time.Now()
	logf("guest image: debootstrap %s (%s) into %s", spec.Suite, strings.Join(spec.Packages, ","), rootfs)
	if err := debroot.Debootstrap(ctx, rootfs, filepath.Join(work, "debootstrap.log"),
		debroot.Spec{Suite: spec.Suite, Mirror: spec.Mirror, Packages: spec.Packages}); err != nil {
		return err
	}
	logf("guest image: debootstrap took %s", time.Since(start).Round(time.Second))

	files := map[string]string{
		"etc/hostname": "guest\n",
		"etc/cloud/cloud.cfg.d/99-guest-test.cfg": spec.CloudCfg,
	}
	for rel, content := range spec.Files {
		files[rel] = content
	}
	for rel, content := range files {
		p := filepath.Join(rootfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("guest image: %w", err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(rel, "usr/local/sbin/") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return fmt.Errorf("guest image: write %s: %w", rel, err)
		}
	}
	for rel, target := range spec.Links {
		p := filepath.Join(rootfs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("guest image: %w", err)
		}
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("guest image: link %s: %w", rel, err)
		}
	}
	// The initramfs debootstrap made follows Debian's configuration; make it again with the spec's.
	if _, ok := spec.Files[initramfsConf]; ok {
		start = time.Now()
		if err := debroot.Run(ctx, filepath.Join(work, "initramfs.log"), "chroot", rootfs, "update-initramfs", "-u", "-k", "all"); err != nil {
			return err
		}
		logf("guest image: update-initramfs took %s", time.Since(start).Round(time.Second))
	}
	// The package cache is only weight in the image.
	for _, dir := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, dir, "*"))
		for _, m := range matches {
			if filepath.Base(m) != "partial" && filepath.Base(m) != "lock" {
				_ = os.RemoveAll(m)
			}
		}
	}

	for dst, pattern := range map[string]string{"vmlinuz": "boot/vmlinuz-*", "initrd.img": "boot/initrd.img-*"} {
		matches, err := filepath.Glob(filepath.Join(rootfs, pattern))
		if err != nil || len(matches) != 1 {
			return fmt.Errorf("guest image: want exactly one %s in the rootfs, found %v", pattern, matches)
		}
		if err := debroot.CopyFile(matches[0], filepath.Join(work, dst)); err != nil {
			return fmt.Errorf("guest image: %w", err)
		}
	}

	start = time.Now()
	if err := debroot.Run(ctx, filepath.Join(work, "mkfs.log"), "mkfs.ext4", "-q", "-F", "-L", "rootfs", "-d", rootfs,
		filepath.Join(work, "root.img"), fmt.Sprintf("%dM", spec.SizeMiB)); err != nil {
		return err
	}
	logf("guest image: mkfs.ext4 -d took %s", time.Since(start).Round(time.Second))
	return nil
}
