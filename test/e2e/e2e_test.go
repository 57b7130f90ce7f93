//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
}

const (
	namespace     = "sriov-udn-e2e"
	vmName        = "vm-e2e"
	boundIface    = "blue"
	boundMAC      = "02:00:00:c0:ff:ee"
	boundIP       = "10.200.0.10"
	sidecarName   = "hook-sidecar-0"
	podInfoVolume = "sriov-udn-podinfo"
	podInfoDir    = "/var/run/kubevirt-private/downwardapi/podinfo"
	// KubeVirt's cloud-init disk inside the compute container: <dir>/<namespace>/<vmi name>/noCloud.iso
	// (pkg/cloud-init/cloud-init.go GetIsoFilePath), dir set by cmd/virt-launcher/virt-launcher.go to
	// <--ephemeral-disk-dir>/cloud-init-data.
	cloudInitISO = "/var/run/kubevirt-ephemeral-disks/cloud-init-data/" + namespace + "/" + vmName + "/noCloud.iso"
)

func configFromEnv() e2eConfig {
	get := func(key, def string) string {
		if v := os.Getenv(key); v != "" {
			return v
		}
		return def
	}
	return e2eConfig{
		cluster:         get("E2E_CLUSTER", "sriov-udn-e2e"),
		image:           get("E2E_IMAGE", "sriov-udn-binding:e2e"),
		nodeImage:       get("E2E_NODE_IMAGE", "kindest/node:v1.34.0"),
		kubevirtVersion: get("E2E_KUBEVIRT_VERSION", "v1.8.0"),
		multusVersion:   get("E2E_MULTUS_VERSION", "v4.2.2"),
		cniVersion:      get("E2E_CNI_PLUGINS_VERSION", "v1.7.1"),
		keepCluster:     os.Getenv("E2E_KEEP_CLUSTER") == "1",
		reuseCluster:    os.Getenv("E2E_REUSE_CLUSTER") == "1",
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

// kubectl runs kubectl against the kind cluster's context.
type kubectl struct {
	t       *testing.T
	context string
}

func (k kubectl) run(ctx context.Context, args ...string) []byte {
	k.t.Helper()
	return run(k.t, ctx, nil, "kubectl", append([]string{"--context", k.context}, args...)...)
}

func (k kubectl) try(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return runErr(ctx, stdin, "kubectl", append([]string{"--context", k.context}, args...)...)
}

// eventually retries check until it succeeds or the deadline passes; for cluster state that
// kubectl wait cannot express. Returns the last error.
func eventually(ctx context.Context, timeout, interval time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still failing after %s: %w", timeout, err)
		case <-ticker.C:
		}
	}
}

func TestE2E_VMBootsThroughTheSriovUDNBinding(t *testing.T) {
	for _, tool := range []string{"docker", "kind", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (%v): the e2e test needs docker, kind and kubectl (see README)", tool, err)
		}
	}
	cfg := configFromEnv()
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()

	_, err := runErr(ctx, nil, "docker", "image", "inspect", cfg.image)
	require.NoError(t, err, "image %s not built: run `make image IMAGE=%s` (make e2e does)", cfg.image, cfg.image)

	createCluster(t, ctx, cfg)
	k := kubectl{t: t, context: "kind-" + cfg.cluster}
	t.Cleanup(func() {
		if t.Failed() {
			dumpDiagnostics(t, k)
		}
	})

	installCNIPlugins(t, ctx, cfg)
	run(t, ctx, nil, "kind", "load", "docker-image", cfg.image, "--name", cfg.cluster)
	installMultus(t, ctx, k, cfg)
	installKubeVirt(t, ctx, k, cfg)

	k.run(ctx, "apply", "-k", filepath.Join(root, "manifests", "overlays", "e2e"))
	// The overlay names sriov-udn-binding:e2e; follow E2E_IMAGE if it says otherwise. The name must
	// keep "sriov-udn-binding": that is how the MutatingAdmissionPolicy finds our container.
	imagePatch, err := json.Marshal(map[string]any{"spec": map[string]any{"configuration": map[string]any{"network": map[string]any{
		"binding": map[string]any{"sriov-udn": map[string]any{"sidecarImage": cfg.image}}}}}})
	require.NoError(t, err)
	k.run(ctx, "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type", "merge", "-p", string(imagePatch))
	k.run(ctx, "-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available", "--timeout=10m")

	t.Run("the admission policy rejects a VM without a cloud-init volume", func(t *testing.T) {
		vm, err := os.ReadFile(filepath.Join(root, "test", "e2e", "testdata", "vm.yaml"))
		require.NoError(t, err)
		k.run(ctx, "apply", "-f", filepath.Join(root, "test", "e2e", "testdata", "namespace.yaml"))
		bad := stripCloudInitVolume(t, ctx, k, vm)
		// A policy takes effect once the apiserver's informer has it: retry the dry run until denied.
		err = eventually(ctx, 2*time.Minute, 2*time.Second, func() error {
			out, err := k.try(ctx, bad, "apply", "--dry-run=server", "-f", "-")
			if err == nil {
				return fmt.Errorf("dry-run admitted the VM: %s", out)
			}
			if !strings.Contains(err.Error(), "cloudInitNoCloud or cloudInitConfigDrive") {
				return fmt.Errorf("denied for another reason: %w", err)
			}
			return nil
		})
		assert.NoError(t, err)
	})

	k.run(ctx, "apply", "-k", filepath.Join(root, "test", "e2e", "testdata"))
	k.run(ctx, "-n", namespace, "wait", "vmi", vmName, "--for", "condition=Ready", "--timeout=15m")

	vmiUID := strings.TrimSpace(string(k.run(ctx, "-n", namespace, "get", "vmi", vmName, "-o", "jsonpath={.metadata.uid}")))
	pod := strings.TrimSpace(string(k.run(ctx, "-n", namespace, "get", "pod", "-l", "kubevirt.io/created-by="+vmiUID,
		"-o", "jsonpath={.items[0].metadata.name}")))
	require.NotEmpty(t, pod, "no virt-launcher pod for VMI %s", vmiUID)

	t.Run("the MutatingAdmissionPolicy mounted pod-info into our sidecar", func(t *testing.T) {
		mounts := k.run(ctx, "-n", namespace, "get", "pod", pod, "-o",
			fmt.Sprintf(`jsonpath={.spec.containers[?(@.name=="%s")].volumeMounts[?(@.name=="%s")].mountPath}`, sidecarName, podInfoVolume))
		assert.Equal(t, podInfoDir, strings.TrimSpace(string(mounts)))
		image := k.run(ctx, "-n", namespace, "get", "pod", pod, "-o",
			fmt.Sprintf(`jsonpath={.spec.containers[?(@.name=="%s")].image}`, sidecarName))
		assert.Contains(t, string(image), "sriov-udn-binding")
	})

	t.Run("the sidecar logged successful hook calls", func(t *testing.T) {
		logs := k.run(ctx, "-n", namespace, "logs", pod, "-c", sidecarName)
		calls := hookCalls(t, logs)
		for _, hook := range []string{"PreCloudInitIso", "OnDefineDomain"} {
			outcomes, ok := calls[hook]
			if assert.True(t, ok, "no %q hook call logged; log:\n%s", hook, logs) {
				for _, o := range outcomes {
					assert.Equal(t, "ok", o, "hook %s outcome (pkg/hooks logInterceptor)", hook)
				}
			}
		}
	})

	t.Run("the cloud-init disk carries our network config and keeps the user's data", func(t *testing.T) {
		image := k.run(ctx, "-n", namespace, "exec", pod, "-c", "compute", "--", "cat", cloudInitISO)
		networkConfig, err := isoRootFile(image, "network-config")
		require.NoError(t, err)
		assert.Contains(t, string(networkConfig), boundMAC)
		assert.Contains(t, string(networkConfig), boundIP)
		userData, err := isoRootFile(image, "user-data")
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(userData), "#cloud-config"), "user-data: %q", userData)
		metaData, err := isoRootFile(image, "meta-data")
		require.NoError(t, err)
		assert.Contains(t, string(metaData), "instance-id")
	})

	t.Run("vmi.status.interfaces reports the bound interface", func(t *testing.T) {
		err := eventually(ctx, 3*time.Minute, 5*time.Second, func() error {
			out, err := k.try(ctx, nil, "-n", namespace, "get", "vmi", vmName, "-o", "json")
			if err != nil {
				return err
			}
			var vmi struct {
				Status struct {
					Interfaces []struct {
						Name       string `json:"name"`
						MAC        string `json:"mac"`
						InfoSource string `json:"infoSource"`
					} `json:"interfaces"`
				} `json:"status"`
			}
			if err := json.Unmarshal(out, &vmi); err != nil {
				return err
			}
			for _, i := range vmi.Status.Interfaces {
				if i.Name == boundIface {
					if i.MAC != boundMAC {
						return fmt.Errorf("interface %s has MAC %q, want %q", boundIface, i.MAC, boundMAC)
					}
					return nil
				}
			}
			return fmt.Errorf("no interface %q in status.interfaces: %+v", boundIface, vmi.Status.Interfaces)
		})
		assert.NoError(t, err)
	})
}

// hookCalls collects, per hook, the outcome of each `"msg":"hook call"` JSON log line.
func hookCalls(t *testing.T, logs []byte) map[string][]string {
	t.Helper()
	calls := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Hook    string `json:"hook"`
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "hook call" {
			continue
		}
		calls[line.Hook] = append(calls[line.Hook], line.Outcome)
	}
	require.NoError(t, sc.Err())
	return calls
}

// stripCloudInitVolume returns the VM manifest without its cloudinitdisk volume, as JSON (which
// kubectl accepts) built from the YAML through kubectl itself, so this package needs no YAML library.
func stripCloudInitVolume(t *testing.T, ctx context.Context, k kubectl, vmYAML []byte) []byte {
	t.Helper()
	out, err := k.try(ctx, vmYAML, "create", "--dry-run=client", "-o", "json", "-f", "-")
	require.NoError(t, err)
	var vm map[string]any
	require.NoError(t, json.Unmarshal(out, &vm))
	spec := vm["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	var kept []any
	for _, v := range spec["volumes"].([]any) {
		if _, ok := v.(map[string]any)["cloudInitNoCloud"]; !ok {
			kept = append(kept, v)
		}
	}
	spec["volumes"] = kept
	data, err := json.Marshal(vm)
	require.NoError(t, err)
	return data
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

func installMultus(t *testing.T, ctx context.Context, k kubectl, cfg e2eConfig) {
	t.Helper()
	k.run(ctx, "apply", "-f", fmt.Sprintf(
		"https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/%s/deployments/multus-daemonset-thick.yml", cfg.multusVersion))
	k.run(ctx, "-n", "kube-system", "rollout", "status", "daemonset/kube-multus-ds", "--timeout=10m")
}

func installKubeVirt(t *testing.T, ctx context.Context, k kubectl, cfg e2eConfig) {
	t.Helper()
	base := "https://github.com/kubevirt/kubevirt/releases/download/" + cfg.kubevirtVersion
	k.run(ctx, "apply", "-f", base+"/kubevirt-operator.yaml")
	k.run(ctx, "apply", "-f", base+"/kubevirt-cr.yaml")
	// kind nodes have no /dev/kvm (or it is not worth depending on): software emulation.
	k.run(ctx, "-n", "kubevirt", "patch", "kubevirt", "kubevirt", "--type", "merge",
		"-p", `{"spec":{"configuration":{"developerConfiguration":{"useEmulation":true}}}}`)
	k.run(ctx, "-n", "kubevirt", "wait", "kv", "kubevirt", "--for", "condition=Available", "--timeout=20m")
}

// dumpDiagnostics logs what is needed to understand a failure after the cluster is gone.
func dumpDiagnostics(t *testing.T, k kubectl) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"-n", namespace, "get", "vm,vmi", "-o", "yaml"},
		{"-n", namespace, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", namespace, "logs", "-l", "kubevirt.io=virt-launcher", "-c", sidecarName, "--tail=200"},
		{"-n", namespace, "logs", "-l", "kubevirt.io=virt-launcher", "-c", "compute", "--tail=200"},
	} {
		out, err := k.try(ctx, nil, args...)
		t.Logf("kubectl %s (err=%v):\n%s", strings.Join(args, " "), err, out)
	}
}
