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

// RegisterBinding installs and registers the binding as docs/install.md tells a user, with kubectl: step 2, a
// kustomization of the manifests' entry point (stock KubeVirt) with the Kubernetes 1.34/1.35 component
// (MutatingAdmissionPolicy v1beta1), applied; step 3, a kustomization of the registration with an images: entry
// for SidecarImage, rendered and patched into the KubeVirt CR as a merge patch. Then the test-only second binding,
// vf-standin, the VF's stand-in.
func (n *Node) RegisterBinding(ctx context.Context, repoRoot string) error {
	install, binding := n.path("my-install"), n.path("my-binding")
	rel := func(dir, p string) (string, error) { return filepath.Rel(dir, filepath.Join(repoRoot, p)) }
	manifests, err := rel(install, "manifests")
	if err != nil {
		return err
	}
	component, err := rel(install, "manifests/components/kubernetes-1.34-1.35")
	if err != nil {
		return err
	}
	registration, err := rel(binding, "manifests/kubevirt/device-info")
	if err != nil {
		return err
	}
	name, tag, _ := strings.Cut(SidecarImage, ":")
	for dir, k := range map[string]string{
		install: fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n", manifests, component),
		binding: fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/sriov-udn-binding/sriov-udn-binding
    newName: %s
    newTag: %s
`, registration, name, tag),
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("install dir: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			return fmt.Errorf("install kustomization: %w", err)
		}
	}
	if _, err := n.Kube().Run(ctx, nil, "apply", "-k", install); err != nil {
		return fmt.Errorf("install the entry point: %w", err)
	}
	rendered, err := n.Kube().Run(ctx, nil, "kustomize", binding)
	if err != nil {
		return fmt.Errorf("render the registration: %w", err)
	}
	file := filepath.Join(binding, "binding.yaml")
	if err := os.WriteFile(file, rendered, 0o644); err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	if _, err := n.Kube().Run(ctx, nil, "patch", "-f", file, "--type", "merge", "--patch-file", file); err != nil {
		return fmt.Errorf("register the binding: %w", err)
	}
	standIn := fmt.Sprintf(`{"spec":{"configuration":{"network":{"binding":{"vf-standin":{"sidecarImage":%q,"downwardAPI":"device-info"}}}}}}`, VFStandInImage)
	if _, err := n.Kube().Run(ctx, nil, "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type", "merge", "-p", standIn); err != nil {
		return fmt.Errorf("register the VF stand-in: %w", err)
	}
	return nil
}

// Uninstall runs docs/install.md's "Uninstall" block as written, in the node's network namespace, with the node's
// kubectl on PATH, but for the two lines that need what this cluster does not have: the examples (no Multus) and
// the Plugin CRD (KubeVirt v1.8): kubectl would fail on them, as the page says.
func (n *Node) Uninstall(ctx context.Context, repoRoot string) error {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "install.md"))
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	_, rest, ok := strings.Cut(string(page), "<!-- docs-test: controlplane-uninstall -->\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		return fmt.Errorf("uninstall: docs/install.md has no controlplane-uninstall block")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if !strings.Contains(l, "manifests/examples/") && !strings.Contains(l, "plugins.plugin.kubevirt.io") {
			lines = append(lines, l)
		}
	}
	script := strings.Join(lines, "\n")
	cmd := exec.CommandContext(ctx, "nsenter", "-t", fmt.Sprint(n.init.Process.Pid), "-n", "--", "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(n.KubectlBinary())+":"+os.Getenv("PATH"), "KUBECONFIG="+n.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("uninstall (docs/install.md):\n%s\n%w\n%s", script, err, out)
	}
	return nil // what is left, the caller checks (cluster_test.go uninstall)
}

// OurLabel selects every object of ours (docs/install.md "Upgrade").
const OurLabel = "app.kubernetes.io/part-of=sriov-udn-binding"
