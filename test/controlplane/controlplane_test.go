package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// baseKubeVirt is the KubeVirt CR of a release install (kubevirt-cr.yaml) before our manifests touch it, with
// fields of the operator's own (emulation, one replica of each component), made with `kubectl apply` as many
// installs do: it carries a last-applied configuration, so a `kubectl apply` of a partial KubeVirt would drop
// every field ours lacks. The registration (docs/install.md step 3) must keep them all.
const baseKubeVirt = `{
  "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
  "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
  "spec": {
    "certificateRotateStrategy": {},
    "configuration": {"developerConfiguration": {"featureGates": [], "useEmulation": true}},
    "customizeComponents": {},
    "imagePullPolicy": "IfNotPresent",
    "infra": {"replicas": 1},
    "workloadUpdateStrategy": {}
  }
}`

// TestControlPlane runs the whole suite on each Kubernetes release of kubeVersions (those selected), one
// cluster lifetime each.
func TestControlPlane(t *testing.T) {
	for _, k := range selectedKubeVersions(t) {
		t.Run("Kubernetes "+k.name, func(t *testing.T) { testControlPlane(t, k) })
	}
}

// testControlPlane is one cluster lifetime: the steps share the server (start-up is the expensive part), and
// each step needs the state the one before it left, as on a user's cluster.
func testControlPlane(t *testing.T, kv kubeVersion) {
	c := startControlPlane(t, kv)
	installCRDs(t, c)
	k := newKubectl(t, c.config)
	ctx := context.Background()
	c.docEnv(t) // once, with this test's lifetime

	// What a KubeVirt install leaves before ours: its namespace and its KubeVirt CR, made by `kubectl apply`.
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kvNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.kubectlApply(t, baseKubeVirt)
	require.Contains(t, c.getKubeVirt(t).GetAnnotations(), lastApplied, "the KubeVirt CR as `kubectl apply` makes it")
	// And the workload namespace, with a VM that predates the policies and violates them, and the NADs the
	// user made for their networks (docs/install.md check 7 reads one before the install).
	namespace := loadUnstructured(t, filepath.Join(manifestsDir, "examples", "namespace.yaml"))
	_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace.GetName()}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, nad := range []string{"nad-layer2.yaml", "nad-localnet.yaml"} {
		obj := loadUnstructured(t, filepath.Join(manifestsDir, "examples", nad))
		_, err := c.dynamic.Resource(nadGVR).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err, "%s", nad)
	}
	legacy := createLegacyVMs(t, c)

	// Every entry point, one after the other as a user switching between them would, with the component
	// docs/install.md tells users of this Kubernetes version to add.
	require.True(t, t.Run("kubectl apply -k of each entry point", func(t *testing.T) {
		for _, dir := range []string{
			filepath.Join(manifestsDir, "overlays", "pod-info"),
			filepath.Join(manifestsDir, "overlays", "e2e"),
			filepath.Join(manifestsDir, "overlays", "stock"),
			manifestsDir,
		} {
			t.Run(dir, func(t *testing.T) {
				if filepath.Base(dir) == "e2e" && kv.mapVersion != "v1beta1" {
					t.Skipf("overlays/e2e is for test/e2e's kind node, Kubernetes 1.34 (MutatingAdmissionPolicy v1beta1): not served by %s", kv.name)
				}
				c.applyAndReadBack(t, k, c.entryPoint(t, dir))
			})
		}
	}))

	// docs/install.md as a user runs it: the checks, the feature gate, their own kustomization with their
	// image (and, on 1.34/1.35, the component), the examples, the verification; in page order, with kubectl.
	checkout := copyRepo(t) // the user's checkout, which the page's commands write into; kept for later steps
	require.True(t, t.Run("docs/install.md, as written", func(t *testing.T) { c.runInstallDoc(t, checkout) }))
	c.waitForPolicies(t)

	t.Run("ValidatingAdmissionPolicy verdicts", func(t *testing.T) { testValidatingVerdicts(t, c) })
	t.Run("User Defined Network examples: server dry run against OVN-Kubernetes' CRDs", func(t *testing.T) { testUDNExamples(t, c) })
	t.Run("VM updates", func(t *testing.T) { testVMUpdates(t, c, legacy) })
	t.Run("memlock warning", func(t *testing.T) { testMemlockWarning(t, c) })
	t.Run("VF live migration opt-in", func(t *testing.T) { testVFMigration(t, c) })
	t.Run("the e2e VM is admitted", func(t *testing.T) {
		vm := loadUnstructured(t, filepath.Join(e2eTestdataDir, "vm.yaml"))
		vm.SetNamespace(vmNamespace)
		vm.SetName(uniqueName("e2e"))
		for _, obj := range []*unstructured.Unstructured{vm, vmiFrom(t, vm)} {
			got := c.write(t, obj, nil)
			assert.NoError(t, got.err)
		}
	})
	t.Run("MutatingAdmissionPolicy on the launcher pod KubeVirt renders", func(t *testing.T) { testLauncherPod(t, c, k) })
	t.Run("the pod-info volume names are reserved (VM, VMI)", func(t *testing.T) { testPodInfoVolumeVerdicts(t, c) })
	t.Run("the pod-info volume of a launcher pod is the pinned one", func(t *testing.T) { testPodInfoPodVerdicts(t, c) })
	t.Run("a manifest the server rejects fails apply with the server's error", func(t *testing.T) { testBrokenManifest(t, c, k) })
	t.Run("MutatingAdmissionPolicy in the version this server does not serve: kubectl names it", func(t *testing.T) { testOtherMAPVersion(t, c, k) })
	t.Run("Plugin API (KubeVirt v1.9+): KubeVirt's CRD and policies admit manifests/overlays/plugin", func(t *testing.T) { testPluginAPI(t, c) })
	// Last: these remove what the steps above need.
	t.Run("docs/install.md's uninstall: nothing of ours is left, the KubeVirt CR loses only our entry", func(t *testing.T) { testUninstall(t, c, checkout) })
	t.Run("docs/openshift.md: the registration in a HyperConverged CR made by kubectl apply, and its removal", func(t *testing.T) { testHCORegistration(t, c) })
}

// entryPoint is what a user of this Kubernetes version applies for the entry point dir: dir itself, or (with
// a component, docs/install.md "Kubernetes versions") their own kustomization of dir plus the component.
func (c *cluster) entryPoint(t *testing.T, dir string) string {
	t.Helper()
	if c.k8s.component == "" {
		return dir
	}
	wrapper := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		require.NoError(t, err)
		r, err := filepath.Rel(wrapper, abs)
		require.NoError(t, err)
		return r
	}
	body := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel(dir) +
		"\ncomponents:\n  - " + rel(c.k8s.component) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(wrapper, "kustomization.yaml"), []byte(body), 0o644))
	return wrapper
}

// runInstallDoc runs the controlplane blocks of docs/install.md for this Kubernetes version, in page order, in
// dir, a copy of the repository (the page's commands write files there, as in a user's checkout), with
// kubectl on PATH and a kubeconfig for this server; then checks what they left on the server.
func (c *cluster) runInstallDoc(t *testing.T, dir string) {
	blocks := controlPlaneBlocks(t, filepath.Join("docs", "install.md"), c.k8s.minor)
	require.NotEmpty(t, blocks)
	before := c.getKubeVirt(t)
	var applied, patched []string
	for _, b := range blocks {
		out, err := runBlock(t, dir, b, c.docEnv(t))
		require.NoError(t, err, "%s:\n%s\noutput:\n%s", b, b.text, out)
		for _, m := range regexp.MustCompile(`(?m)kubectl apply -k (\S+)`).FindAllStringSubmatch(b.text, -1) {
			applied = append(applied, m[1])
		}
		for _, m := range regexp.MustCompile(`(?m)kubectl patch -f (\S+) --type merge --patch-file (\S+)`).FindAllStringSubmatch(b.text, -1) {
			require.Equal(t, m[1], m[2], "%s: the registration patches the CR its file names with that file", b)
			patched = append(patched, m[1])
		}
	}
	// The install applied the user's kustomization and then the examples: both are stored as built; and it
	// patched the KubeVirt CR with the registration.
	require.Equal(t, []string{"my-install", "manifests/examples/"}, applied, "the kubectl apply -k steps of docs/install.md")
	require.Equal(t, []string{"my-binding/binding.yaml"}, patched, "the registration step of docs/install.md")
	c.installed = filepath.Join(dir, "my-install")
	c.assertAllStored(t, kustomizeBuild(t, c.installed))
	c.assertAllStored(t, kustomizeBuild(t, filepath.Join(dir, "manifests", "examples")))
	gates, _, err := unstructured.NestedStringSlice(c.getKubeVirt(t).Object, "spec", "configuration", "developerConfiguration", "featureGates")
	require.NoError(t, err)
	assert.Equal(t, []string{"ReservedOverheadMemlock"}, gates, "step 1's JSON patch")
	binding := c.getTypedKubeVirt(t).Spec.Configuration.NetworkConfiguration.Binding[bindingName]
	assert.Equal(t, "registry.example.com/sriov-udn-binding:v0.1.0", binding.SidecarImage, "step 3's images: entry")
	// What the merge patch stored for the binding is what the user's registration built, and every other field
	// of the CR is as it was, but for step 1's feature gate.
	reg := kustomizeBuild(t, filepath.Join(dir, "my-binding"))
	require.Len(t, reg, 1)
	want, _, err := unstructured.NestedMap(reg[0].Object, "spec", "configuration", "network", "binding", bindingName)
	require.NoError(t, err)
	after := c.getKubeVirt(t)
	expected := before.DeepCopy()
	require.NoError(t, unstructured.SetNestedStringSlice(expected.Object, []string{"ReservedOverheadMemlock"}, "spec", "configuration", "developerConfiguration", "featureGates"))
	require.NoError(t, unstructured.SetNestedMap(expected.Object, want, "spec", "configuration", "network", "binding", bindingName))
	assert.Equal(t, expected.Object["spec"], after.Object["spec"], "the KubeVirt CR after docs/install.md: only the feature gate and our entry are new")
	assert.Equal(t, before.GetAnnotations()[lastApplied], after.GetAnnotations()[lastApplied], "the last applied configuration is the operator's, untouched")
}

// applyAndReadBack runs `kubectl apply -k dir` and reads back every object it sent.
func (c *cluster) applyAndReadBack(t *testing.T, k *kubectl, dir string) {
	t.Helper()
	out, err := k.applyKustomize(dir)
	require.NoError(t, err, "kubectl apply -k %s: %s", dir, out)
	t.Logf("kubectl apply -k %s:\n%s", dir, out)
	c.assertAllStored(t, kustomizeBuild(t, dir))
}

func (c *cluster) getKubeVirt(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	kv, err := c.dynamic.Resource(kvGVR).Namespace(kvNamespace).Get(context.Background(), kvName, metav1.GetOptions{})
	require.NoError(t, err)
	return kv
}

func (c *cluster) getTypedKubeVirt(t *testing.T) *kubevirtv1.KubeVirt {
	t.Helper()
	kv := &kubevirtv1.KubeVirt{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(c.getKubeVirt(t).Object, kv))
	return kv
}

// waitForPolicies waits until every admission policy is in force: the server stores a policy at once,
// but its admission plugin learns of it (and of its binding) through an informer. A dry-run create of a VM
// that only that policy objects to shows when.
func (c *cluster) waitForPolicies(t *testing.T) {
	t.Helper()
	probes := map[string]func(*testing.T, *unstructured.Unstructured){
		mainPolicy: withoutCloudInit,
		podNICPolicy: func(t *testing.T, obj *unstructured.Unstructured) {
			editInterface(t, obj, "default", passtWithoutMAC)
			dropNetworkData(t, obj)
		},
		memlockName: func(_ *testing.T, obj *unstructured.Unstructured) {
			removeField(obj, "domain", "memory", "reservedOverhead")
		},
		podInfoVolumePolicy: func(t *testing.T, obj *unstructured.Unstructured) {
			withVolume(forgedDownwardAPI("sriov-udn-podinfo"))(t, obj)
		},
	}
	for policy, breakIt := range probes {
		var last result
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			vm := exampleVM(t)
			breakIt(t, vm)
			last = c.writeDryRun(t, vm)
			return (last.err != nil && strings.Contains(last.err.Error(), "'"+policy+"'")) ||
				strings.Contains(strings.Join(last.warnings, "\n"), "'"+policy+"'"), nil
		})
		require.NoError(t, err, "policy %s not in force: %v %v", policy, last.err, last.warnings)
	}
}

// testOtherMAPVersion applies the entry point in the MutatingAdmissionPolicy version this server does not serve
// (1.34: without the component, so v1; 1.36: with it, so v1beta1): kubectl fails with the message
// docs/troubleshooting.md quotes, naming that version.
func testOtherMAPVersion(t *testing.T, c *cluster, k *kubectl) {
	other := &cluster{k8s: kubeVersion{component: kubeVersions[0].component}}
	want := "v1beta1"
	if c.k8s.component != "" {
		other.k8s.component, want = "", "v1"
	}
	out, err := k.applyKustomize(other.entryPoint(t, manifestsDir))
	require.Error(t, err, "kubectl apply -k with MutatingAdmissionPolicy %s on Kubernetes %s: %s", want, c.k8s.name, out)
	msg := `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/` + want + `"`
	assert.Contains(t, err.Error(), msg)
	page, rerr := os.ReadFile(filepath.Join(repoRoot, "docs", "troubleshooting.md"))
	require.NoError(t, rerr)
	assert.Contains(t, strings.Join(strings.Fields(string(page)), " "), strings.ReplaceAll(msg, `"admissionregistration.k8s.io/`+want+`"`, `"admissionregistration.k8s.io/v1"`),
		"docs/troubleshooting.md quotes the message")
	t.Logf("kubectl: %s", err)
}
