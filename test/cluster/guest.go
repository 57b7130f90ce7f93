package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/guest"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// The images of the cluster's guest (test/guest ClusterImageSpec): its root as a containerDisk, and its kernel
// and initrd for KubeVirt's kernel boot (spec.domain.firmware.kernelBoot.container). The root is an ext4 file
// system with no partition table and no boot loader, as test/guest boots it with qemu -kernel.
const (
	GuestDiskImage   = "localhost/cluster/guest-disk:1"
	GuestKernelImage = "localhost/cluster/guest-kernel:1"
	// GuestKernelPath and GuestInitrdPath are the kernel boot's kernelPath and initrdPath in GuestKernelImage.
	GuestKernelPath = "/boot/vmlinuz"
	GuestInitrdPath = "/boot/initrd.img"
)

// guestCacheDir is test/guest's image cache ($GUEST_CACHE_DIR, else /var/cache/sriov-udn-binding/guest), so
// that `.ci/run`'s background prefetch (test/cmd/guest-prefetch) builds the image while other suites run.
func guestCacheDir() string {
	if d := os.Getenv("GUEST_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/sriov-udn-binding/guest"
}

// GuestImages builds (or finds cached) the guest image and returns the two images of it. The containerDisk
// holds the root as compressed qcow2 (KubeVirt accepts raw or qcow2 without a backing file in /disk, and puts
// an overlay of its own on top: the image is never written), converted by the KubeVirt root's qemu-img and
// cached beside the cluster's builds. Every file is readable by qemu (uid 107).
func GuestImages(ctx context.Context, kubevirtRoot string, logf func(string, ...any)) ([]Image, error) {
	spec := guest.ClusterImageSpec()
	img, _, err := guest.EnsureImage(ctx, guestCacheDir(), spec, logf)
	if err != nil {
		return nil, fmt.Errorf("cluster guest image: %w", err)
	}
	qcow2 := filepath.Join(CacheDir(), "guest-disk-"+spec.Key()+".qcow2")
	if err := convertOnce(ctx, kubevirtRoot, img.Root, qcow2); err != nil {
		return nil, err
	}
	read := func(paths ...string) ([][]byte, error) {
		var out [][]byte
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("cluster guest image: %w", err)
			}
			out = append(out, b)
		}
		return out, nil
	}
	data, err := read(qcow2, img.Kernel, img.Initrd)
	if err != nil {
		return nil, err
	}
	return []Image{
		{Tag: GuestDiskImage, Layers: []*Layer{{Files: map[string]ImageFile{"disk/disk.qcow2": {Mode: 0o444, Data: data[0]}}}}},
		{Tag: GuestKernelImage, Layers: []*Layer{{Files: map[string]ImageFile{
			GuestKernelPath[1:]: {Mode: 0o444, Data: data[1]},
			GuestInitrdPath[1:]: {Mode: 0o444, Data: data[2]},
		}}}},
	}, nil
}

// convertOnce writes raw as compressed qcow2 to out with qemu-img from root, unless out exists.
func convertOnce(ctx context.Context, root, raw, out string) error {
	unlock, err := debroot.Lock(out + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(CacheDir(), "guest-disk-")
	if err != nil {
		return fmt.Errorf("cluster guest image: %w", err)
	}
	defer os.RemoveAll(tmp)
	mounts := []trixietools.Mount{{Source: filepath.Dir(raw), Target: "/mnt"}, {Source: tmp, Target: "/tmp"}}
	if _, err := (trixietools.Root{Dir: root}).Run(ctx, mounts, "qemu-img", "convert", "-c", "-O", "qcow2",
		filepath.Join("/mnt", filepath.Base(raw)), "/tmp/disk.qcow2"); err != nil {
		return fmt.Errorf("cluster guest image: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "disk.qcow2"), out); err != nil {
		return fmt.Errorf("cluster guest image: %w", err)
	}
	return nil
}

// BuildContainerDisk compiles KubeVirt's container-disk (cmd/container-disk-v2alpha/main.c) statically, as its
// own build does (hack/build-go.sh: it runs in scratch images), to out. virt-controller's init container
// container-disk-binary copies it from the virt-launcher image into every containerDisk and kernel boot
// container, whose only process it is (pkg/virt-controller/services/template.go).
func BuildContainerDisk(ctx context.Context, kubevirt, out string) error {
	src := filepath.Join(kubevirt, "src", "cmd", "container-disk-v2alpha", "main.c")
	if msg, err := exec.CommandContext(ctx, "gcc", "-static", "-O2", "-o", out, src).CombinedOutput(); err != nil {
		return fmt.Errorf("gcc -static %s: %w\n%s", src, err, msg)
	}
	return nil
}
