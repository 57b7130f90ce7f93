package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// CacheDir is where the cluster's builds are kept between runs: $SRIOV_UDN_CLUSTER_CACHE, else
// /var/cache/sriov-udn-binding/cluster (beside the guest images' cache).
func CacheDir() string {
	if d := os.Getenv("SRIOV_UDN_CLUSTER_CACHE"); d != "" {
		return d
	}
	return "/var/cache/sriov-udn-binding/cluster"
}

// NodeRootSpec is the trixie root the node's etcd and containerd come from (their binaries need only libc and
// run on this bookworm host; bookworm's containerd 1.6 and etcd 3.4 are older than Kubernetes 1.34 supports).
func NodeRootSpec() debroot.Spec {
	return debroot.Spec{Suite: "trixie", Packages: []string{"containerd", "etcd-server"}, Tool: "mmdebstrap"}
}

// kubernetesBinaries are the `tool` lines of test/cluster/kubernetes.
func kubernetesBinaries() []string {
	return []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "kubectl"}
}

// kubernetesVersion is what the binaries report (component-base's version variables), k8s.io/kubernetes' own.
const kubernetesVersion = "v1.34.2"

// kubernetesLDFlags stamp the binaries with kubernetesVersion, as Kubernetes' own release build does.
const kubernetesLDFlags = "-s -w -X k8s.io/component-base/version.gitVersion=" + kubernetesVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34"

// kubernetesBuildArgs are go's arguments that build binary b of test/cluster/kubernetes into out (run in that
// module with CGO_ENABLED=0). The Makefile builds test-controlplane's kube-apiserver and kubectl with the same
// ones, so that Go's build cache serves both; TestMakefile_BuildsKubernetesAsTheCluster holds them together.
func kubernetesBuildArgs(b, out string) []string {
	return []string{"build", "-trimpath", "-ldflags", kubernetesLDFlags, "-o", out, "k8s.io/kubernetes/cmd/" + b}
}

// BuildKubernetes builds the Kubernetes binaries from test/cluster/kubernetes into a cache entry keyed by that
// module's go.mod and go.sum, and returns its directory; a complete entry is reused.
func BuildKubernetes(ctx context.Context, moduleDir string, logf func(string, ...any)) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(moduleDir, f))
		if err != nil {
			return "", fmt.Errorf("kubernetes binaries: %w", err)
		}
		h.Write(b)
	}
	dir := filepath.Join(CacheDir(), "kubernetes-"+kubernetesVersion+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	done := filepath.Join(dir, ".complete")
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", CacheDir(), err)
	}
	unlock, err := debroot.Lock(dir + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for _, b := range kubernetesBinaries() {
		start := time.Now()
		cmd := exec.CommandContext(ctx, "go", kubernetesBuildArgs(b, filepath.Join(dir, b))...)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s in %s: %w\n%s", b, moduleDir, err, out)
		}
		logf("cluster: built %s in %s", b, time.Since(start).Round(time.Second))
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", fmt.Errorf("mark %s complete: %w", dir, err)
	}
	return dir, nil
}

// Inputs are what a node with KubeVirt and the binding starts from, all built or cached by Prepare.
type Inputs struct {
	Paths    Paths
	Operator string // KubeVirt's operator manifest for the cluster's images
}

// Prepare builds (or finds cached) everything the cluster runs: the Kubernetes and KubeVirt binaries, the two
// trixie roots, the test-only programs (pause, the CNI and VF stand-ins), one docker archive of the node's and
// KubeVirt's images, our image by `make image-local`, and KubeVirt's operator manifest; archives and manifest go
// into dir. phase is told each step done.
func Prepare(ctx context.Context, repoRoot, dir string, phase func(string)) (Inputs, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	var in Inputs
	var err error
	if in.Paths.Kubernetes, err = BuildKubernetes(ctx, filepath.Join(repoRoot, "test", "cluster", "kubernetes"), logf); err != nil {
		return in, err
	}
	phase("Kubernetes binaries")
	if in.Paths.Root, _, err = debroot.Ensure(ctx, filepath.Join(CacheDir(), "roots"), NodeRootSpec(), logf); err != nil {
		return in, fmt.Errorf("node root: %w", err)
	}
	phase("node root (etcd, containerd)")
	programs := map[string][]byte{}
	for _, pkg := range []string{"./cmd/cluster-pause", "./cmd/cluster-cni", "./cmd/cluster-vfstandin"} {
		if programs[pkg], err = StaticBinary(filepath.Join(repoRoot, "test"), pkg); err != nil {
			return in, err
		}
	}
	in.Paths.CNIPlugin = programs["./cmd/cluster-cni"]
	kubevirt, err := BuildKubeVirt(ctx, repoRoot, logf)
	if err != nil {
		return in, err
	}
	phase("KubeVirt binaries")
	patched, err := BuildPatchedKubeVirt(ctx, repoRoot, kubevirt, logf)
	if err != nil {
		return in, err
	}
	phase("virt-handler and virt-launcher with patches/kubevirt")
	kubevirtRoot, _, err := debroot.Ensure(ctx, filepath.Join(CacheDir(), "roots"), KubeVirtRootSpec(), logf)
	if err != nil {
		return in, fmt.Errorf("KubeVirt root: %w", err)
	}
	phase("KubeVirt root (libvirt, qemu)")
	containerDisk := filepath.Join(dir, "container-disk")
	if err := BuildContainerDisk(ctx, kubevirt, containerDisk); err != nil {
		return in, err
	}
	kvImages, err := KubeVirtImages(kubevirtRoot, kubevirt, patched, containerDisk)
	if err != nil {
		return in, err
	}
	guestImages, err := GuestImages(ctx, kubevirtRoot, logf)
	if err != nil {
		return in, err
	}
	phase("guest image (test/guest ClusterImageSpec) as containerDisk and kernel boot images")
	archive := filepath.Join(dir, "images.tar")
	all := append([]Image{
		{Tag: PauseImage, Layers: []*Layer{{Files: map[string]ImageFile{"pause": {Mode: 0o755, Data: programs["./cmd/cluster-pause"]}}}},
			Entrypoint: []string{"/pause"}},
		{Tag: VFStandInImage, Layers: []*Layer{{Files: map[string]ImageFile{"vf-standin": {Mode: 0o755, Data: programs["./cmd/cluster-vfstandin"]}}}},
			Entrypoint: []string{"/vf-standin"}, User: "107:107"},
	}, append(kvImages, guestImages...)...)
	if err := WriteArchive(archive, all...); err != nil {
		return in, err
	}
	in.Operator = filepath.Join(dir, "kubevirt-operator.yaml")
	if err := KubeVirtOperatorManifest(ctx, kubevirt, in.Operator); err != nil {
		return in, err
	}
	sidecar, err := SidecarArchive(ctx, repoRoot, dir)
	if err != nil {
		return in, err
	}
	in.Paths.Images = []string{archive, sidecar}
	phase("images and KubeVirt's manifest")
	return in, nil
}
