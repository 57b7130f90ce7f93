package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// SidecarImage is our image as `make image-local` builds it; the name keeps sriov-udn-binding, which the
	// MutatingAdmissionPolicy finds our container by.
	SidecarImage = "localhost/sriov-udn-binding:cluster"
	// VFStandInImage is test/cmd/cluster-vfstandin's image.
	VFStandInImage = "localhost/cluster/vf-standin:1"
)

// SidecarArchive builds our image with `make image-local` and a podman with storage of its own (vfs, no
// registry, removed afterwards), and saves it as a docker archive in dir.
func SidecarArchive(ctx context.Context, repoRoot, dir string) (string, error) {
	// podman refuses a runroot of more than 50 characters: its storage gets a short directory of its own.
	store, err := os.MkdirTemp("/tmp", "pm-")
	if err != nil {
		return "", fmt.Errorf("podman storage: %w", err)
	}
	defer os.RemoveAll(store)
	podman := []string{"podman", "--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"),
		"--storage-driver", "vfs", "--runtime", "runc"}
	build := exec.CommandContext(ctx, "make", "--no-print-directory", "image-local", "PODMAN="+strings.Join(podman, " "), "LOCAL_IMAGE="+SidecarImage)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image-local: %w\n%s", err, out)
	}
	archive := filepath.Join(dir, "sidecar.tar")
	save := exec.CommandContext(ctx, podman[0], append(podman[1:], "save", "--format", "docker-archive", "-o", archive, SidecarImage)...)
	if out, err := save.CombinedOutput(); err != nil {
		return "", fmt.Errorf("podman save %s: %w\n%s", SidecarImage, err, out)
	}
	return archive, nil
}

// RegisterBinding registers the binding as docs/install.md tells a user, with kubectl: a kustomization of the
// manifests' entry point (stock KubeVirt), the Kubernetes 1.34/1.35 component (MutatingAdmissionPolicy v1beta1)
// and an images: entry for SidecarImage. Then the test-only second binding, vf-standin, the VF's stand-in.
func (n *Node) RegisterBinding(ctx context.Context, repoRoot string) error {
	dir := n.path("install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install dir: %w", err)
	}
	rel := func(p string) (string, error) { return filepath.Rel(dir, filepath.Join(repoRoot, p)) }
	manifests, err := rel("manifests")
	if err != nil {
		return err
	}
	component, err := rel("manifests/components/kubernetes-1.34-1.35")
	if err != nil {
		return err
	}
	name, tag, _ := strings.Cut(SidecarImage, ":")
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
components:
  - %s
images:
  - name: ghcr.io/sriov-udn-binding/sriov-udn-binding
    newName: %s
    newTag: %s
`, manifests, component, name, tag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return fmt.Errorf("install kustomization: %w", err)
	}
	if _, err := n.Kube().Run(ctx, nil, "apply", "-k", dir); err != nil {
		return fmt.Errorf("register the binding: %w", err)
	}
	standIn := fmt.Sprintf(`{"spec":{"configuration":{"network":{"binding":{"vf-standin":{"sidecarImage":%q,"downwardAPI":"device-info"}}}}}}`, VFStandInImage)
	if _, err := n.Kube().Run(ctx, nil, "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type", "merge", "-p", standIn); err != nil {
		return fmt.Errorf("register the VF stand-in: %w", err)
	}
	return nil
}
