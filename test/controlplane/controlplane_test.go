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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// baseKubeVirt is the KubeVirt CR of a release install (kubevirt-cr.yaml) before our manifests touch
// it: the live object that `kubectl apply` merges our partial KubeVirt into.
const baseKubeVirt = `{
  "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
  "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
  "spec": {
    "certificateRotateStrategy": {},
    "configuration": {"developerConfiguration": {"featureGates": []}},
    "customizeComponents": {},
    "imagePullPolicy": "IfNotPresent",
    "workloadUpdateStrategy": {}
  }
}`

// TestControlPlane is one cluster lifetime: the steps share the server (start-up is the expensive part),
// and each step needs the state the one before it left, as on a user's cluster.
func TestControlPlane(t *testing.T) {
	c := startControlPlane(t, docsServerFlags(t))
	installCRDs(t, c)
	k := newKubectl(t, c.config)
	ctx := context.Background()

	// What a KubeVirt install leaves before ours: its namespace and its KubeVirt CR.
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kvNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kv := &unstructured.Unstructured{}
	require.NoError(t, kv.UnmarshalJSON([]byte(baseKubeVirt)))
	_, err = c.dynamic.Resource(kvGVR).Namespace(kvNamespace).Create(ctx, kv, metav1.CreateOptions{})
	require.NoError(t, err)
	// And the workload namespace, with a VM that predates the policies and violates them.
	namespace := loadUnstructured(t, filepath.Join(manifestsDir, "examples", "namespace.yaml"))
	_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace.GetName()}}, metav1.CreateOptions{})
	require.NoError(t, err)
	legacy := createLegacyVMs(t, c)

	require.True(t, t.Run("docs/install.md step 1: the JSON patch adds the ReservedOverheadMemlock feature gate", func(t *testing.T) {
		patch := docsFeatureGatePatch(t)
		_, err := c.dynamic.Resource(kvGVR).Namespace(kvNamespace).Patch(ctx, kvName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err, "kubectl -n kubevirt patch kubevirt kubevirt --type json -p %s", patch)
		gates, _, err := unstructured.NestedStringSlice(c.getKubeVirt(t).Object, "spec", "configuration", "developerConfiguration", "featureGates")
		require.NoError(t, err)
		assert.Equal(t, []string{"ReservedOverheadMemlock"}, gates)
	}))

	// Step 2, for every entry point of docs/install.md, one after the other as a user switching
	// between them would: the last one is the default (manifests/), which the later steps run against.
	require.True(t, t.Run("docs/install.md step 2: kubectl apply -k", func(t *testing.T) {
		for _, dir := range []string{
			filepath.Join(manifestsDir, "overlays", "pod-info"),
			filepath.Join(manifestsDir, "overlays", "e2e"),
			filepath.Join(manifestsDir, "overlays", "stock"),
			manifestsDir,
		} {
			t.Run(dir, func(t *testing.T) { c.applyAndReadBack(t, k, dir) })
		}
	}))
	c.waitForPolicies(t)

	require.True(t, t.Run("docs/install.md step 3: kubectl apply -k manifests/examples/", func(t *testing.T) {
		c.applyAndReadBack(t, k, filepath.Join(manifestsDir, "examples"))
	}))

	t.Run("ValidatingAdmissionPolicy verdicts", func(t *testing.T) { testValidatingVerdicts(t, c) })
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
	t.Run("a manifest the server rejects fails apply with the server's error", func(t *testing.T) { testBrokenManifest(t, k) })
	t.Run("Plugin API (KubeVirt v1.9+): KubeVirt's CRD and policies admit manifests/overlays/plugin", func(t *testing.T) { testPluginAPI(t, c) })
}

// applyAndReadBack runs `kubectl apply -k dir` and reads back every object it sent.
func (c *cluster) applyAndReadBack(t *testing.T, k *kubectl, dir string) {
	t.Helper()
	out, err := k.applyKustomize(dir)
	require.NoError(t, err, "kubectl apply -k %s: %s", dir, out)
	t.Logf("kubectl apply -k %s:\n%s", dir, out)
	objs := kustomizeBuild(t, dir)
	c.assertAllStored(t, objs)
	// The binding registration is a map entry that kubectl three-way merges into the live CR: a field
	// that an earlier overlay set and this one does not (e2e's domainAttachmentType) must be gone.
	for _, obj := range objs {
		if obj.GetKind() != "KubeVirt" {
			continue
		}
		want, _, err := unstructured.NestedMap(obj.Object, "spec", "configuration", "network", "binding", bindingName)
		require.NoError(t, err)
		got, _, err := unstructured.NestedMap(c.getKubeVirt(t).Object, "spec", "configuration", "network", "binding", bindingName)
		require.NoError(t, err)
		assert.Equal(t, want, got, "stored binding %s after kubectl apply -k %s", bindingName, dir)
	}
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

// docsFeatureGatePatch is the JSON patch of step 1 of docs/install.md "Install", verbatim.
func docsFeatureGatePatch(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(installDoc)
	require.NoError(t, err)
	m := regexp.MustCompile(`kubectl -n kubevirt patch kubevirt kubevirt --type json -p \\\n\s*'([^']+)'`).FindSubmatch(data)
	require.NotNil(t, m, "%s: no `kubectl -n kubevirt patch kubevirt kubevirt --type json -p '...'`", installDoc)
	return string(m[1])
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
