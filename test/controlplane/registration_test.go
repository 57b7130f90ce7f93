package controlplane_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// lastApplied is the annotation `kubectl apply` keeps its last applied configuration in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// kubectlApply runs `kubectl apply -f -` of obj (JSON or YAML) with the kubectl the docs' blocks run with, as an
// operator creating or updating their CR would.
func (c *cluster) kubectlApply(t *testing.T, obj string) {
	t.Helper()
	b := shellBlock{file: "(kubectl apply of a CR)", text: "kubectl apply -f - <<'EOF'\n" + obj + "\nEOF\n"}
	out, err := runBlock(t, t.TempDir(), b, c.docEnv(t))
	require.NoError(t, err, "kubectl apply:\n%s", out)
}

// ourKinds are the kinds of every object an entry point ships (manifests/*/kustomization.yaml labels them all),
// for this server's MutatingAdmissionPolicy version; the Plugin when the suite's KubeVirt has the Plugin API
// (testPluginAPI installs its CRD and applies overlays/plugin).
func (c *cluster) ourKinds(plugins bool) []schema.GroupVersionResource {
	admission := func(version, resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: version, Resource: resource}
	}
	out := []schema.GroupVersionResource{
		admission("v1", "validatingadmissionpolicies"),
		admission("v1", "validatingadmissionpolicybindings"),
		admission(c.k8s.mapVersion, "mutatingadmissionpolicies"),
		admission(c.k8s.mapVersion, "mutatingadmissionpolicybindings"),
		corev1.SchemeGroupVersion.WithResource("configmaps"),
	}
	if plugins {
		out = append(out, schema.GroupVersionResource{Group: "plugin.kubevirt.io", Version: "v1alpha1", Resource: "plugins"})
	}
	return out
}

// testUninstall runs docs/install.md's uninstall, as written, after everything of every entry point was applied
// (the stock install, overlays/plugin's Plugin): nothing with our label is left, and the KubeVirt CR, made by
// `kubectl apply`, loses our binding's entry and nothing else. Without the Plugin API (KubeVirt v1.8) the `plugins`
// line is left out, as the page says for a server that does not know the kind.
func testUninstall(t *testing.T, c *cluster, checkout string) {
	ctx := context.Background()
	plugins := hasPluginAPI(kubevirtTag(t))
	before := c.getKubeVirt(t)
	_, ours, err := unstructured.NestedMap(before.Object, "spec", "configuration", "network", "binding", bindingName)
	require.NoError(t, err)
	require.True(t, ours, "the binding is registered before the uninstall")
	for _, gvr := range c.ourKinds(plugins) {
		list, err := c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: ourLabel})
		require.NoError(t, err, "%s", gvr)
		if gvr.Resource != "configmaps" { // none ships today: the uninstall deletes them for a later version's sake
			require.NotEmpty(t, list.Items, "%s: the suite applied some before the uninstall", gvr)
		}
	}

	for _, b := range markedBlocks(t, filepath.Join("docs", "install.md"), markControlPlane+"-uninstall") {
		var lines []string
		for _, l := range strings.Split(b.text, "\n") {
			switch {
			case !plugins && strings.Contains(l, "plugins.plugin.kubevirt.io"):
				continue
			case strings.HasPrefix(l, "kubectl delete -k manifests/examples/"):
				// The examples' namespace is deleted, and kubectl waits for its finalizer, which only
				// kube-controller-manager (not run here) removes.
				l += " --wait=false"
			}
			lines = append(lines, l)
		}
		require.Len(t, lines, len(strings.Split(b.text, "\n"))-map[bool]int{true: 0, false: 1}[plugins], "%s: the plugins line", b)
		b.text = strings.Join(lines, "\n")
		out, err := runBlock(t, checkout, b, c.docEnv(t))
		require.NoError(t, err, "%s:\n%s\noutput:\n%s", b, b.text, out)
	}

	for _, gvr := range c.ourKinds(plugins) {
		list, err := c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: ourLabel})
		require.NoError(t, err, "%s", gvr)
		var left []string
		for _, o := range list.Items {
			left = append(left, o.GetNamespace()+"/"+o.GetName())
		}
		assert.Empty(t, left, "%s with %s after the uninstall", gvr.Resource, ourLabel)
	}
	after := c.getKubeVirt(t)
	expected := before.DeepCopy()
	unstructured.RemoveNestedField(expected.Object, "spec", "configuration", "network", "binding", bindingName)
	assert.Equal(t, expected.Object["spec"], after.Object["spec"], "the KubeVirt CR after the uninstall: only our entry is gone")
	assert.Equal(t, before.GetAnnotations()[lastApplied], after.GetAnnotations()[lastApplied])
}

// ourLabel selects every object of ours (docs/install.md "Upgrade").
const ourLabel = "app.kubernetes.io/part-of=sriov-udn-binding"

// baseHyperConverged is a HyperConverged CR as an operator would write it with fields of their own (a feature
// gate, no workload updates, another binding), made with `kubectl apply`.
const baseHyperConverged = `{
  "apiVersion": "hco.kubevirt.io/v1beta1", "kind": "HyperConverged",
  "metadata": {"name": "kubevirt-hyperconverged", "namespace": "openshift-cnv"},
  "spec": {
    "featureGates": {"downwardMetrics": true},
    "workloadUpdateStrategy": {"workloadUpdateMethods": [], "batchEvictionSize": 5},
    "networkBinding": {"passt": {"sidecarImage": "quay.io/kubevirt/network-passt-binding:v1.8.4"}}
  }
}`

var hcoGVR = schema.GroupVersionResource{Group: "hco.kubevirt.io", Version: "v1beta1", Resource: "hyperconvergeds"}

// testHCORegistration runs docs/openshift.md's install step (the entry point, then the registration patched
// into the HyperConverged CR) against HCO's own CRD, on a HyperConverged CR made by `kubectl apply`: every other
// field survives, and docs/install.md's HCO uninstall removes our entry and nothing else. The page's
// `oc` is kubectl here (toolPath). On the 1.36 server only: the entry point is written for MutatingAdmissionPolicy
// v1, and on 1.34/1.35 the page adds the component exactly as docs/install.md does, which runs above.
func testHCORegistration(t *testing.T, c *cluster) {
	if c.k8s.mapVersion != "v1" {
		t.Skipf("docs/openshift.md's blocks apply overlays/hco as written (MutatingAdmissionPolicy v1): Kubernetes %s serves %s; the 1.36 server runs them", c.k8s.name, c.k8s.mapVersion)
	}
	ctx := context.Background()
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-cnv"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.kubectlApply(t, baseHyperConverged)
	get := func() *unstructured.Unstructured {
		hc, err := c.dynamic.Resource(hcoGVR).Namespace("openshift-cnv").Get(ctx, "kubevirt-hyperconverged", metav1.GetOptions{})
		require.NoError(t, err)
		return hc
	}
	before := get()
	require.Contains(t, before.GetAnnotations(), lastApplied)

	checkout := copyRepo(t)
	for _, b := range markedBlocks(t, filepath.Join("docs", "openshift.md"), markControlPlane+"-hco") {
		out, err := runBlock(t, checkout, b, c.docEnv(t))
		require.NoError(t, err, "%s:\n%s\noutput:\n%s", b, b.text, out)
	}
	reg := kustomizeBuild(t, filepath.Join(checkout, "my-binding"))
	require.Len(t, reg, 1)
	want, _, err := unstructured.NestedMap(reg[0].Object, "spec", "networkBinding", bindingName)
	require.NoError(t, err)
	assert.Equal(t, "registry.example.com/sriov-udn-binding:v0.1.0", want["sidecarImage"], "the registration's images: entry")
	registered := get()
	expected := before.DeepCopy()
	require.NoError(t, unstructured.SetNestedMap(expected.Object, want, "spec", "networkBinding", bindingName))
	assert.Equal(t, expected.Object["spec"], registered.Object["spec"], "the HyperConverged CR after docs/openshift.md: only our entry is new")
	assert.Equal(t, before.GetAnnotations()[lastApplied], registered.GetAnnotations()[lastApplied])

	for _, b := range markedBlocks(t, filepath.Join("docs", "install.md"), markControlPlane+"-hco") {
		out, err := runBlock(t, checkout, b, c.docEnv(t))
		require.NoError(t, err, "%s:\n%s\noutput:\n%s", b, b.text, out)
	}
	assert.Equal(t, before.Object["spec"], get().Object["spec"], "the HyperConverged CR after the uninstall: only our entry is gone")
}
