package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kube"
)

// KubeVirtVersion is the KubeVirt the cluster runs: test/go.mod's.
const KubeVirtVersion = "v1.8.4"

// kubevirtCommands are the binaries of KubeVirt's tree the cluster runs. They are built in one go build with
// cgo, as virt-launcher (libvirt) and virt-handler (<linux/kvm.h>) need it: one cgo setting compiles the
// dependencies once for all of them (with CGO_ENABLED=0 for the others, Kubernetes' packages were compiled
// twice), and every image has the trixie root's libc.
var kubevirtCommands = []string{
	"./cmd/virt-operator", "./cmd/virt-api", "./cmd/virt-controller", "./cmd/virt-handler", "./cmd/virt-launcher",
	"./cmd/virt-launcher-monitor", "./cmd/virt-chroot", "./cmd/virt-probe", "./cmd/virt-tail", "./cmd/virt-freezer",
	"./tools/manifest-templator", "./tools/resource-generator",
}

// kubevirtBuildFlags are the go build flags of KubeVirt's binaries, stock and patched: -trimpath lets the
// patched tree's build reuse every package the patches leave alone.
var kubevirtBuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// BuildKubeVirt copies KubeVirt's source from the module cache into a cache entry, makes it build here (its
// staging replaces mapped to the published kubevirt.io/api and client-go of the same version; the stub of
// patches/kubevirt/main/libnbd-stub for libguestfs.org/libnbd, which the Go module proxy refuses: no NBD
// client, which only VM backup and export use) and builds its binaries into <entry>/bin. A complete entry is
// reused; the key is the version and the stub's files.
func BuildKubeVirt(ctx context.Context, repoRoot string, logf func(string, ...any)) (string, error) {
	stub := filepath.Join(repoRoot, "patches", "kubevirt", "main", "libnbd-stub")
	h := sha256.New()
	h.Write([]byte(KubeVirtVersion))
	h.Write([]byte(strings.Join(kubevirtBuildFlags, " ") + "\n" + strings.Join(kubevirtCommands, " ")))
	for _, f := range []string{"go.mod", "libnbd.go"} {
		b, err := os.ReadFile(filepath.Join(stub, f))
		if err != nil {
			return "", fmt.Errorf("KubeVirt build: %w", err)
		}
		h.Write(b)
	}
	entry := filepath.Join(CacheDir(), "kubevirt-"+KubeVirtVersion+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", CacheDir(), err)
	}
	unlock, err := debroot.Lock(entry + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(entry, ".complete")); err == nil {
		return entry, nil
	}
	if err := os.RemoveAll(entry); err != nil {
		return "", fmt.Errorf("remove incomplete %s: %w", entry, err)
	}
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "kubevirt.io/kubevirt@"+KubeVirtVersion).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download kubevirt.io/kubevirt@%s: %w", KubeVirtVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download kubevirt.io/kubevirt@%s: no Dir in %q (%v)", KubeVirtVersion, out, err)
	}
	tree := filepath.Join(entry, "src")
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", entry, err)
	}
	for _, c := range [][]string{
		{"cp", "-r", mod.Dir, tree},
		{"chmod", "-R", "u+w", tree},
	} {
		if msg, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %w\n%s", strings.Join(c, " "), err, msg)
		}
	}
	goEnv := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
	edit := exec.CommandContext(ctx, "go", "mod", "edit",
		"-replace", "kubevirt.io/api=kubevirt.io/api@"+KubeVirtVersion,
		"-replace", "kubevirt.io/client-go=kubevirt.io/client-go@"+KubeVirtVersion,
		"-replace", "libguestfs.org/libnbd="+stub)
	edit.Dir, edit.Env = tree, goEnv
	if msg, err := edit.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod edit in %s: %w\n%s", tree, err, msg)
	}
	logf("cluster: libnbd: STUB in use (patches/kubevirt/main/libnbd-stub: the Go module proxy refuses libguestfs.org/libnbd)")
	start := time.Now()
	args := append(append([]string{"build"}, kubevirtBuildFlags...), "-o", filepath.Join(entry, "bin")+"/")
	b := exec.CommandContext(ctx, "go", append(args, kubevirtCommands...)...)
	b.Dir, b.Env = tree, append(goEnv, "CGO_ENABLED=1")
	if msg, err := b.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of KubeVirt %s's commands: %w\n%s", KubeVirtVersion, err, msg)
	}
	logf("cluster: built KubeVirt's %d commands in %s", len(kubevirtCommands), time.Since(start).Round(time.Second))
	if err := os.WriteFile(filepath.Join(entry, ".complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("mark %s complete: %w", entry, err)
	}
	return entry, nil
}

// KubeVirtRootSpec is the trixie root KubeVirt's images are made of: libvirt 11.3 and qemu 10 (KubeVirt v1.8.4
// ships 11.9 and 10.1), xorriso for the cloud-init ISO, libcap2-bin for setcap, iproute2, nftables and iptables
// for virt-handler and the launcher's network setup.
func KubeVirtRootSpec() debroot.Spec {
	return debroot.Spec{Suite: "trixie", Tool: "mmdebstrap", Packages: []string{
		"iproute2", "iptables", "ipxe-qemu", "libcap2-bin", "libvirt-clients", "libvirt-daemon", "libvirt-daemon-driver-qemu",
		"libvirt-daemon-log", "nftables", "procps", "qemu-system-x86", "qemu-utils", "seabios", "xorriso",
	}}
}

// kubevirtImageTag is the tag of every KubeVirt image of the cluster; the operator's manifest names it.
const kubevirtImageTag = KubeVirtVersion + "-cluster"

// virtqemudShim runs Debian's monolithic libvirtd under the name virt-launcher starts (Debian ships no modular
// daemons), and gives its socket virtqemud's name: virt-launcher's non-root URI names virtqemud-sock.
const virtqemudShim = `#!/bin/sh
dir=${XDG_RUNTIME_DIR:-/run}/libvirt
[ "$(id -u)" = 0 ] && dir=/run/libvirt
(
  n=0
  while [ ! -S "$dir/libvirt-sock" ] && [ "$n" -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  ln -sf libvirt-sock "$dir/virtqemud-sock"
) &
exec /usr/sbin/libvirtd "$@"
`

// KubeVirtImages are KubeVirt's images, all of one layer: the trixie root, KubeVirt's binaries, its libvirt and
// qemu configuration (cmd/virt-launcher), the virtqemud shim, users qemu (107) and kubevirt (1001), and
// virt-launcher-monitor with cap_net_bind_service (its ambient capability; without it virt-launcher cannot be
// started). virt-operator, virt-api and virt-controller run as 1001, as KubeVirt's own images do. virt-handler
// comes twice more, under VirtHandlerStockImage and VirtHandlerPatchedImage (the latter with a layer holding
// patched.Handler): Node.UseVirtHandler puts either under the name the operator's DaemonSet runs. So does
// virt-launcher, under VirtLauncherStockImage and VirtLauncherPatchedImage (patched.Launcher), for
// Node.UseVirtLauncher. containerDisk is BuildContainerDisk's binary, at /usr/bin/container-disk as in
// KubeVirt's virt-launcher image.
func KubeVirtImages(root, kubevirt string, patched PatchedKubeVirt, containerDisk string) ([]Image, error) {
	files := map[string]ImageFile{}
	for _, b := range []string{"virt-operator", "virt-api", "virt-controller", "virt-handler", "virt-launcher", "virt-launcher-monitor",
		"virt-chroot", "virt-probe", "virt-tail", "virt-freezer"} {
		data, err := os.ReadFile(filepath.Join(kubevirt, "bin", b))
		if err != nil {
			return nil, fmt.Errorf("KubeVirt image: %w", err)
		}
		f := ImageFile{Mode: 0o755, Data: data}
		if b == "virt-launcher-monitor" {
			f.Caps = VFSCaps(10) // CAP_NET_BIND_SERVICE
		}
		files["usr/bin/"+b] = f
	}
	src := filepath.Join(kubevirt, "src", "cmd", "virt-launcher")
	for from, to := range map[string]string{
		"node-labeller/node-labeller.sh": "usr/bin/node-labeller.sh", "virtqemud.conf": "etc/libvirt/virtqemud.conf",
		"qemu.conf": "etc/libvirt/qemu.conf", "nsswitch.conf": "etc/nsswitch.conf",
	} {
		data, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			return nil, fmt.Errorf("KubeVirt image: %w", err)
		}
		files[to] = ImageFile{Mode: 0o755, Data: data} // module zips drop modes; node-labeller.sh must run
	}
	files["usr/sbin/virtqemud"] = ImageFile{Mode: 0o755, Data: []byte(virtqemudShim)}
	cd, err := os.ReadFile(containerDisk)
	if err != nil {
		return nil, fmt.Errorf("KubeVirt image: %w", err)
	}
	files["usr/bin/container-disk"] = ImageFile{Mode: 0o755, Data: cd}
	for name, line := range map[string]string{"etc/passwd": "qemu:x:107:107:qemu:/home/qemu:/bin/bash\nkubevirt:x:1001:1001::/home/kubevirt:/bin/false\n",
		"etc/group": "qemu:x:107:\nkubevirt:x:1001:\n"} {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return nil, fmt.Errorf("KubeVirt image: %w", err)
		}
		files[name] = ImageFile{Mode: 0o644, Data: append(data, line...)}
	}
	layer := &Layer{Root: root, Files: files}
	var images []Image
	for _, c := range []string{"virt-operator", "virt-api", "virt-controller", "virt-handler", "virt-launcher"} {
		img := Image{Tag: "localhost/kubevirt/" + c + ":" + kubevirtImageTag, Layers: []*Layer{layer}}
		if c == "virt-operator" || c == "virt-api" || c == "virt-controller" {
			img.User = "1001"
		}
		images = append(images, img)
	}
	handler, err := os.ReadFile(patched.Handler)
	if err != nil {
		return nil, fmt.Errorf("KubeVirt image: %w", err)
	}
	launcher, err := os.ReadFile(patched.Launcher)
	if err != nil {
		return nil, fmt.Errorf("KubeVirt image: %w", err)
	}
	images = append(images,
		Image{Tag: VirtHandlerStockImage, Layers: []*Layer{layer}},
		Image{Tag: VirtHandlerPatchedImage, Layers: []*Layer{layer, {Files: map[string]ImageFile{"usr/bin/virt-handler": {Mode: 0o755, Data: handler}}}}},
		Image{Tag: VirtLauncherStockImage, Layers: []*Layer{layer}},
		Image{Tag: VirtLauncherPatchedImage, Layers: []*Layer{layer, {Files: map[string]ImageFile{"usr/bin/virt-launcher": {Mode: 0o755, Data: launcher}}}}})
	return images, nil
}

// virtHandlerImage is the image the operator's virt-handler DaemonSet runs; VirtHandlerStockImage and
// VirtHandlerPatchedImage are the two virt-handlers Node.UseVirtHandler tags under that name. virtLauncherImage
// is the one virt-controller renders into launcher pods, and VirtLauncherStockImage and VirtLauncherPatchedImage
// the two that Node.UseVirtLauncher tags under it.
const (
	virtHandlerImage         = "localhost/kubevirt/virt-handler:" + kubevirtImageTag
	VirtHandlerStockImage    = virtHandlerImage + "-stock"
	VirtHandlerPatchedImage  = virtHandlerImage + "-patched"
	virtLauncherImage        = "localhost/kubevirt/virt-launcher:" + kubevirtImageTag
	VirtLauncherStockImage   = virtLauncherImage + "-stock"
	VirtLauncherPatchedImage = virtLauncherImage + "-patched"
)

// UseVirtLauncher makes the given image (VirtLauncherStockImage or VirtLauncherPatchedImage) the virt-launcher
// of the launcher pods started from now on: it tags it in containerd under the name virt-controller renders (pull
// policy IfNotPresent, so kubelet takes the local image). Running VMs keep theirs until they restart.
func (n *Node) UseVirtLauncher(ctx context.Context, image string) error {
	return n.tagImage(ctx, image, virtLauncherImage)
}

// tagImage tags image as name in the node's containerd (namespace k8s.io, kubelet's).
func (n *Node) tagImage(ctx context.Context, image, name string) error {
	tag := exec.CommandContext(ctx, filepath.Join(n.root, "usr", "bin", "ctr"), "-a", n.containerdSocket(), "-n", "k8s.io",
		"images", "tag", "--force", image, name)
	if out, err := tag.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images tag %s %s: %w\n%s", image, name, err, out)
	}
	return nil
}

// UseVirtHandler makes the node's virt-handler the given image (VirtHandlerStockImage or
// VirtHandlerPatchedImage): it tags it in containerd under the name the operator's DaemonSet runs (pull policy
// IfNotPresent, so kubelet takes the local image), deletes the running virt-handler pod and waits until its
// DaemonSet's new pod is ready. The operator sees its own DaemonSet unchanged and leaves it.
func (n *Node) UseVirtHandler(ctx context.Context, image string) error {
	if err := n.tagImage(ctx, image, virtHandlerImage); err != nil {
		return err
	}
	if _, err := n.Kube().Run(ctx, nil, "-n", "kubevirt", "delete", "pod", "-l", "kubevirt.io=virt-handler", "--wait=true", "--timeout=2m"); err != nil {
		return fmt.Errorf("virt-handler %s: %w", image, err)
	}
	return n.waitFor(ctx, "virt-handler ready on "+image, 4*time.Minute, nil, func() error {
		out, err := n.Kube().Run(ctx, nil, "-n", "kubevirt", "get", "pod", "-l", "kubevirt.io=virt-handler", "-o",
			`jsonpath={range .items[*]}{.metadata.deletionTimestamp}/{.status.containerStatuses[?(@.name=="virt-handler")].ready}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if lines := strings.Fields(string(out)); len(lines) != 1 || lines[0] != "/true" {
			return fmt.Errorf("virt-handler pods (deleted/ready): %q", out)
		}
		return nil
	})
}

// RestartVirtHandler runs meanwhile while no virt-handler runs on the node, then UseVirtHandler(image). The
// name the DaemonSet runs is untagged first and the running pod deleted: its successor cannot start (kubelet
// finds no image, and no registry serves one) until UseVirtHandler tags the image again and deletes it.
func (n *Node) RestartVirtHandler(ctx context.Context, image string, meanwhile func() error) error {
	rm := exec.CommandContext(ctx, filepath.Join(n.root, "usr", "bin", "ctr"), "-a", n.containerdSocket(), "-n", "k8s.io",
		"images", "rm", virtHandlerImage)
	if out, err := rm.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images rm %s: %w\n%s", virtHandlerImage, err, out)
	}
	if _, err := n.Kube().Run(ctx, nil, "-n", "kubevirt", "delete", "pod", "-l", "kubevirt.io=virt-handler", "--wait=true", "--timeout=2m"); err != nil {
		return fmt.Errorf("virt-handler: %w", err)
	}
	if err := n.waitFor(ctx, "virt-handler's successor held back without its image", 2*time.Minute, nil, func() error {
		out, err := n.Kube().Run(ctx, nil, "-n", "kubevirt", "get", "pod", "-l", "kubevirt.io=virt-handler", "-o",
			`jsonpath={range .items[*]}{.status.containerStatuses[?(@.name=="virt-handler")].state.waiting.reason}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if reason := strings.TrimSpace(string(out)); reason != "ErrImagePull" && reason != "ImagePullBackOff" {
			return fmt.Errorf("virt-handler's waiting reason %q", reason)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := meanwhile(); err != nil {
		return fmt.Errorf("while no virt-handler runs: %w", err)
	}
	return n.UseVirtHandler(ctx, image)
}

// KubeVirtOperatorManifest writes KubeVirt's operator manifest for the cluster's images (tag kubevirtImageTag,
// pull policy IfNotPresent), made by KubeVirt's own generators as its release does: resource-generator for the
// KubeVirt CRD and the operator's RBAC, manifest-templator for the rest.
func KubeVirtOperatorManifest(ctx context.Context, kubevirt, out string) error {
	gen := filepath.Join(filepath.Dir(out), "kubevirt-generated")
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return fmt.Errorf("KubeVirt manifest: %w", err)
	}
	bin := func(b string) string { return filepath.Join(kubevirt, "bin", b) }
	for file, typ := range map[string][]string{
		"kv-resource.yaml":                        {"--type=kv"},
		"rbac-operator.authorization.k8s.yaml.in": {"--type=operator-rbac", "--namespace={{.Namespace}}"},
	} {
		b, err := exec.CommandContext(ctx, bin("resource-generator"), typ...).Output()
		if err != nil {
			return fmt.Errorf("KubeVirt resource-generator %v: %w", typ, err)
		}
		if err := os.WriteFile(filepath.Join(gen, file), b, 0o644); err != nil {
			return fmt.Errorf("KubeVirt manifest: %w", err)
		}
	}
	logo := filepath.Join(gen, "logo")
	if err := os.WriteFile(logo, []byte("logo"), 0o644); err != nil {
		return fmt.Errorf("KubeVirt manifest: %w", err)
	}
	// Two passes, as hack/build-manifests.sh makes them: the generated files into the template, then the variables
	// into everything (the generated RBAC holds {{.Namespace}} itself).
	templator := func(args ...string) ([]byte, error) {
		b, err := exec.CommandContext(ctx, bin("manifest-templator"), args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return nil, fmt.Errorf("KubeVirt manifest-templator: %w\n%s", err, ee.Stderr)
			}
			return nil, fmt.Errorf("KubeVirt manifest-templator: %w", err)
		}
		return b, nil
	}
	files, err := templator("--process-files", "--generated-manifests-dir="+gen,
		"--input-file="+filepath.Join(kubevirt, "src", "manifests", "release", "kubevirt-operator.yaml.in"))
	if err != nil {
		return err
	}
	tmp := filepath.Join(gen, "kubevirt-operator.yaml.in.tmp")
	if err := os.WriteFile(tmp, files, 0o644); err != nil {
		return fmt.Errorf("KubeVirt manifest: %w", err)
	}
	b, err := templator("--process-vars", "--input-file="+tmp, "--namespace=kubevirt", "--container-prefix=localhost/kubevirt",
		"--container-tag="+kubevirtImageTag, "--image-pull-policy=IfNotPresent", "--kubevirt-logo-path="+logo)
	if err != nil {
		return err
	}
	if bytes.Contains(b, []byte("{{")) {
		return fmt.Errorf("KubeVirt manifest: a template variable is left in %s", out)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("KubeVirt manifest: %w", err)
	}
	return nil
}

// KubeVirtCR is the KubeVirt CR of the cluster: software emulation (no /dev/kvm here), the imported images, one
// replica of each infrastructure component, and the hook sidecars' resources docs/operations.md advises.
const KubeVirtCR = `apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  imagePullPolicy: IfNotPresent
  configuration:
    developerConfiguration:
      useEmulation: true
      # docs/install.md step 1: VFIO needs the memlock overhead KubeVirt reserves with this gate. HostDisk: the
      # VM whose restart boots the same root again keeps it on the node (vm_test.go persistentRoot).
      featureGates: [ReservedOverheadMemlock, HostDisk]
    # docs/operations.md: every hook sidecar's container gets these (pkg/virt-controller/services/renderresources.go).
    supportContainerResources:
    - type: sidecar
      resources:
        requests: {memory: ` + sidecarMemoryRequest + `}
        limits: {memory: ` + sidecarMemoryLimit + `}
  infra:
    replicas: 1
`

// sidecarMemoryRequest and sidecarMemoryLimit are the KubeVirt CR's sidecar resources, as docs/operations.md
// advises them.
const (
	sidecarMemoryRequest = "32Mi"
	sidecarMemoryLimit   = "56Mi"
)

// Kube is the cluster's kubectl as the admin, run from inside the node's network namespace.
func (n *Node) Kube() kube.Kubectl {
	return kube.Kubectl{Binary: n.KubectlBinary(), Kubeconfig: n.Kubeconfig, Wrap: []string{"nsenter", "-t", fmt.Sprint(n.init.Process.Pid), "-n", "--"}}
}

// PatchedKubeVirt is what BuildPatchedKubeVirt makes: the paths of virt-handler (0001-0003 change it) and
// virt-launcher (0005 changes it) built with the patch series.
type PatchedKubeVirt struct {
	Handler, Launcher string
}

// BuildPatchedKubeVirt builds virt-handler and virt-launcher from KubeVirt's tree of the entry BuildKubeVirt
// made, with the patch series of patches/kubevirt/<KubeVirtVersion> applied (git apply, in a copy of the tree),
// into a cache entry of its own, keyed by the KubeVirt entry and the patches: changing a patch rebuilds only
// these two.
func BuildPatchedKubeVirt(ctx context.Context, repoRoot, kubevirt string, logf func(string, ...any)) (PatchedKubeVirt, error) {
	var none PatchedKubeVirt
	patches, err := filepath.Glob(filepath.Join(repoRoot, "patches", "kubevirt", KubeVirtVersion, "*.patch"))
	if err != nil || len(patches) == 0 {
		return none, fmt.Errorf("patched KubeVirt: no patches under patches/kubevirt/%s (%v)", KubeVirtVersion, err)
	}
	h := sha256.New()
	h.Write([]byte(filepath.Base(kubevirt)))
	for _, p := range patches {
		b, err := os.ReadFile(p)
		if err != nil {
			return none, fmt.Errorf("patched KubeVirt: %w", err)
		}
		h.Write(b)
	}
	entry := filepath.Join(CacheDir(), "kubevirt-patched-"+KubeVirtVersion+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	built := PatchedKubeVirt{Handler: filepath.Join(entry, "virt-handler"), Launcher: filepath.Join(entry, "virt-launcher")}
	unlock, err := debroot.Lock(entry + ".lock")
	if err != nil {
		return none, err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(entry, ".complete")); err == nil {
		return built, nil
	}
	if err := os.RemoveAll(entry); err != nil {
		return none, fmt.Errorf("remove incomplete %s: %w", entry, err)
	}
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return none, fmt.Errorf("create %s: %w", entry, err)
	}
	start := time.Now()
	tree := filepath.Join(entry, "src")
	if msg, err := exec.CommandContext(ctx, "cp", "-r", filepath.Join(kubevirt, "src"), tree).CombinedOutput(); err != nil {
		return none, fmt.Errorf("patched KubeVirt: copy KubeVirt's tree: %w\n%s", err, msg)
	}
	for _, p := range patches {
		apply := exec.CommandContext(ctx, "git", "apply", p)
		apply.Dir = tree
		if msg, err := apply.CombinedOutput(); err != nil {
			return none, fmt.Errorf("patched KubeVirt: git apply %s: %w\n%s", filepath.Base(p), err, msg)
		}
	}
	args := append(append([]string{"build"}, kubevirtBuildFlags...), "-o", entry+"/", "./cmd/virt-handler", "./cmd/virt-launcher")
	b := exec.CommandContext(ctx, "go", args...)
	b.Dir = tree
	b.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "CGO_ENABLED=1")
	if msg, err := b.CombinedOutput(); err != nil {
		return none, fmt.Errorf("go build ./cmd/virt-handler ./cmd/virt-launcher of KubeVirt %s with patches/kubevirt/%s: %w\n%s", KubeVirtVersion, KubeVirtVersion, err, msg)
	}
	// The tree is only needed for the build.
	if err := os.RemoveAll(tree); err != nil {
		return none, fmt.Errorf("patched KubeVirt: %w", err)
	}
	if err := os.WriteFile(filepath.Join(entry, ".complete"), nil, 0o644); err != nil {
		return none, fmt.Errorf("mark %s complete: %w", entry, err)
	}
	logf("cluster: built KubeVirt's virt-handler and virt-launcher with the %d patches of patches/kubevirt/%s in %s", len(patches), KubeVirtVersion, time.Since(start).Round(time.Second))
	return built, nil
}
