//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kube"
)

// Everything the run depends on, overridable from the environment (see README "End-to-end test").
type e2eConfig struct {
	cluster         string // E2E_CLUSTER: kind cluster name
	image           string // E2E_IMAGE: sidecar image, already built (make image)
	nodeImage       string // E2E_NODE_IMAGE: kind node image (Kubernetes 1.34: MutatingAdmissionPolicy v1beta1)
	kubevirtVersion string // E2E_KUBEVIRT_VERSION
	multusVersion   string // E2E_MULTUS_VERSION
	cniVersion      string // E2E_CNI_PLUGINS_VERSION: containernetworking/plugins, for bridge + static
	keepCluster     bool   // E2E_KEEP_CLUSTER=1: do not delete the cluster (debugging, reruns)
	reuseCluster    bool   // E2E_REUSE_CLUSTER=1: use an existing cluster of that name
	// E2E_KUBECONFIG: run the suite on that cluster as it is, with no kind: KubeVirt deployed, the binding
	// registered (docs/install.md), Multus and the bridge and static CNI plugins on its nodes.
	kubeconfig string
	// E2E_FIXTURES, E2E_NAMESPACE, E2E_VM: a kustomize directory of fixtures for that cluster's networks, in
	// place of testdata/ (the suite's Target says what they hold).
	fixtures, fixturesNamespace, fixturesVM string
}

// The kind fixtures (testdata/): a bridge network standing in for the SR-IOV one, and a cirros VM whose blue
// NIC uses the binding.
const (
	namespace = "sriov-udn-e2e"
	vmName    = "vm-e2e"
)

func configFromEnv() e2eConfig {
	get := func(key, def string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		return def
	}
	return e2eConfig{
		cluster:           get("E2E_CLUSTER", "sriov-udn-e2e"),
		image:             get("E2E_IMAGE", "sriov-udn-binding:e2e"),
		nodeImage:         get("E2E_NODE_IMAGE", "kindest/node:v1.34.0"),
		kubevirtVersion:   get("E2E_KUBEVIRT_VERSION", "v1.8.0"),
		multusVersion:     get("E2E_MULTUS_VERSION", "v4.2.2"),
		cniVersion:        get("E2E_CNI_PLUGINS_VERSION", "v1.7.1"),
		keepCluster:       os.Getenv("E2E_KEEP_CLUSTER") == "1",
		reuseCluster:      os.Getenv("E2E_REUSE_CLUSTER") == "1",
		kubeconfig:        os.Getenv("E2E_KUBECONFIG"),
		fixtures:          os.Getenv("E2E_FIXTURES"),
		fixturesNamespace: get("E2E_NAMESPACE", namespace),
		fixturesVM:        get("E2E_VM", vmName),
	}
}

// repoRoot is two levels up from this package (test/e2e).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "manifests", "overlays", "e2e", "kustomization.yaml"))
	require.NoError(t, err, "not run from test/e2e?")
	return root
}

// run executes a command, failing the test with its output on error.
func run(t *testing.T, ctx context.Context, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	out, err := runErr(ctx, stdin, name, args...)
	require.NoError(t, err, "%s %s", name, strings.Join(args, " "))
	return out
}

func runErr(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// The suite (suite.go) on a kind cluster this test makes, or on the cluster of E2E_KUBECONFIG.
func TestE2E_VMBootsThroughTheSriovUDNBinding(t *testing.T) {
	cfg := configFromEnv()
	root := repoRoot(t)
	target := Target{Fixtures: filepath.Join(root, "test", "e2e", "testdata"), Namespace: namespace, VM: vmName}
	if cfg.fixtures != "" {
		target.Fixtures, target.Namespace, target.VM = cfg.fixtures, cfg.fixturesNamespace, cfg.fixturesVM
	}
	if cfg.kubeconfig != "" {
		if _, err := exec.LookPath("kubectl"); err != nil {
			t.Skipf("kubectl not found (%v): the suite runs kubectl with E2E_KUBECONFIG", err)
		}
		target.Kubeconfig = cfg.kubeconfig
		Run(t, target)
		return
	}
	for _, tool := range []string{"docker", "kind", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (%v): the kind e2e test needs docker, kind and kubectl (see README)", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()

	_, err := runErr(ctx, nil, "docker", "image", "inspect", cfg.image)
	require.NoError(t, err, "image %s not built: run `make image IMAGE=%s` (make e2e does)", cfg.image, cfg.image)

	createCluster(t, ctx, cfg)
	target.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(target.Kubeconfig, run(t, ctx, nil, "kind", "get", "kubeconfig", "--name", cfg.cluster), 0o600))
	k := kube.Kubectl{Kubeconfig: target.Kubeconfig}

	installCNIPlugins(t, ctx, cfg)
	run(t, ctx, nil, "kind", "load", "docker-image", cfg.image, "--name", cfg.cluster)
	installMultus(t, ctx, k, cfg)
	installKubeVirt(t, ctx, k, cfg)

	must(t, ctx, k, "apply", "-k", filepath.Join(root, "manifests", "overlays", "e2e"))
	// The registration, as docs/install.md gives it: the kustomization's output, patched in with itself.
	reg := filepath.Join(t.TempDir(), "registration.yaml")
	require.NoError(t, os.WriteFile(reg, run(t, ctx, nil, "kubectl", "kustomize", filepath.Join(root, "manifests", "overlays", "e2e", "registration")), 0o644))
	must(t, ctx, k, "patch", "-f", reg, "--type", "merge", "--patch-file", reg)
	// The registration names sriov-udn-binding:e2e; follow E2E_IMAGE if it says otherwise. The name must
	// keep "sriov-udn-binding": that is how the MutatingAdmissionPolicy finds our container.
	imagePatch, err := json.Marshal(map[string]any{"spec": map[string]any{"configuration": map[string]any{"network": map[string]any{
		"binding": map[string]any{Binding: map[string]any{"sidecarImage": cfg.image}}}}}})
	require.NoError(t, err)
	must(t, ctx, k, "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type", "merge", "-p", string(imagePatch))
	must(t, ctx, k, "-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available", "--timeout=10m")

	Run(t, target)
}

func createCluster(t *testing.T, ctx context.Context, cfg e2eConfig) {
	t.Helper()
	clusters := run(t, ctx, nil, "kind", "get", "clusters")
	exists := false
	for _, c := range strings.Fields(string(clusters)) {
		exists = exists || c == cfg.cluster
	}
	if exists && cfg.reuseCluster {
		t.Logf("reusing kind cluster %s", cfg.cluster)
		return
	}
	require.False(t, exists, "kind cluster %s already exists: delete it or set E2E_REUSE_CLUSTER=1", cfg.cluster)

	// MutatingAdmissionPolicy is beta and off by default in Kubernetes 1.34-1.35.
	kindConfig := `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
featureGates:
  MutatingAdmissionPolicy: true
runtimeConfig:
  admissionregistration.k8s.io/v1beta1: "true"
nodes:
  - role: control-plane
  - role: worker
`
	file := filepath.Join(t.TempDir(), "kind.yaml")
	require.NoError(t, os.WriteFile(file, []byte(kindConfig), 0o600))
	run(t, ctx, nil, "kind", "create", "cluster", "--name", cfg.cluster, "--image", cfg.nodeImage, "--config", file, "--wait", "5m")
	if !cfg.keepCluster {
		t.Cleanup(func() {
			if _, err := runErr(context.Background(), nil, "kind", "delete", "cluster", "--name", cfg.cluster); err != nil {
				t.Logf("delete kind cluster %s: %v", cfg.cluster, err)
			}
		})
	}
}

// installCNIPlugins copies the reference bridge and static IPAM plugins, which kind's node image does
// not ship, into every node's /opt/cni/bin.
func installCNIPlugins(t *testing.T, ctx context.Context, cfg e2eConfig) {
	t.Helper()
	url := fmt.Sprintf("https://github.com/containernetworking/plugins/releases/download/%[1]s/cni-plugins-linux-%[2]s-%[1]s.tgz",
		cfg.cniVersion, runtime.GOARCH)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "download %s", url)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "download %s", url)
	gz, err := gzip.NewReader(resp.Body)
	require.NoError(t, err)
	dir := t.TempDir()
	wanted := map[string]bool{"bridge": true, "static": true}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		name := filepath.Base(hdr.Name)
		if !wanted[name] || hdr.Typeflag != tar.TypeReg {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY, 0o755)
		require.NoError(t, err)
		_, err = io.Copy(f, io.LimitReader(tr, 200<<20))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		delete(wanted, name)
	}
	require.Empty(t, wanted, "missing from %s", url)

	nodes := run(t, ctx, nil, "kind", "get", "nodes", "--name", cfg.cluster)
	for _, node := range strings.Fields(string(nodes)) {
		for _, plugin := range []string{"bridge", "static"} {
			run(t, ctx, nil, "docker", "cp", filepath.Join(dir, plugin), node+":/opt/cni/bin/"+plugin)
		}
	}
}

func installMultus(t *testing.T, ctx context.Context, k kube.Kubectl, cfg e2eConfig) {
	t.Helper()
	must(t, ctx, k, "apply", "-f", fmt.Sprintf(
		"https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/%s/deployments/multus-daemonset-thick.yml", cfg.multusVersion))
	must(t, ctx, k, "-n", "kube-system", "rollout", "status", "daemonset/kube-multus-ds", "--timeout=10m")
}

func installKubeVirt(t *testing.T, ctx context.Context, k kube.Kubectl, cfg e2eConfig) {
	t.Helper()
	base := "https://github.com/kubevirt/kubevirt/releases/download/" + cfg.kubevirtVersion
	must(t, ctx, k, "apply", "-f", base+"/kubevirt-operator.yaml")
	must(t, ctx, k, "apply", "-f", base+"/kubevirt-cr.yaml")
	// kind nodes have no /dev/kvm (or it is not worth depending on): software emulation.
	must(t, ctx, k, "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type", "merge",
		"-p", `{"spec":{"configuration":{"developerConfiguration":{"useEmulation":true}}}}`)
	must(t, ctx, k, "-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available", "--timeout=20m")
}
