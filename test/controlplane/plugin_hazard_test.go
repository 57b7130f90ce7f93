package controlplane_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	hazardPolicy      = "sriov-udn-binding-plugin-hazard.kubevirt.io"
	hazardVMBinding   = "sriov-udn-binding-plugin-hazard-vm.kubevirt.io"
	hazardHostdevices = "sriov-udn-binding-plugin-hazard-hostdevices.kubevirt.io"
)

// withCoreSRIOV adds a core SR-IOV interface (KubeVirt's own sriov binding) and its Multus network.
func withCoreSRIOV(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	ifaces, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "domain", "devices", "interfaces")...)
	require.NoError(t, err)
	setField(t, obj, append(ifaces, map[string]any{"name": "core", "sriov": map[string]any{}}), "domain", "devices", "interfaces")
	nets, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "networks")...)
	require.NoError(t, err)
	setField(t, obj, append(nets, map[string]any{"name": "core", "multus": map[string]any{"networkName": "sriov-nad"}}), "networks")
}

// withHostDevice adds a spec hostDevices entry (a PCI or a mediated device, as the KubeVirt CR permits it).
func withHostDevice(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	setField(t, obj, []any{map[string]any{"name": "nvme", "deviceName": "example.com/nvme"}}, "domain", "devices", "hostDevices")
}

// TestPluginHazardPolicy_V190_VerdictsWhileAPluginExists proves manifests/plugin/hazard-policy.yaml (the
// containment of kubevirt/kubevirt#18861, test/plugin's hazard) on a real kube-apiserver with KubeVirt's
// Plugin CRD: while a Plugin exists a VMI with a core SR-IOV interface is denied at creation naming the issue
// and the Plugin, a VM with one and anything with hostDevices is admitted with a warning, a VM with one can
// still be updated (stopped), and our own VMs pass untouched; once the Plugin is deleted (the policy being
// live, as the denial showed), nothing is checked.
// Its own servers, one per Kubernetes version of the suite (kubeVersions, those selected).
func TestPluginHazardPolicy_V190_VerdictsWhileAPluginExists(t *testing.T) {
	version := kubevirtTag(t)
	if !hasPluginAPI(version) {
		t.Skipf("KubeVirt %s has no Plugin API, so no Plugin CR and no hazard (#18861 is v1.9.0's): make test-controlplane runs this on v1.9.0", version)
	}
	for _, k := range selectedKubeVersions(t) {
		t.Run("Kubernetes "+k.name, func(t *testing.T) { hazardVerdicts(t, version, k) })
	}
}

// hazardVerdicts runs the verdicts on a control plane of Kubernetes k.
func hazardVerdicts(t *testing.T, version string, k kubeVersion) {
	ctx := context.Background()
	c := startControlPlane(t, k)
	installCRDs(t, c)
	client, err := apiextensionsclient.NewForConfig(c.config)
	require.NoError(t, err)
	installCRD(t, ctx, client, loadKubeVirtPluginObjects(t, version).CRD)
	_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vmNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The policies exactly as `kubectl apply -k manifests/overlays/plugin` sends them.
	mapper := c.restMapper(t)
	var plugin *unstructured.Unstructured
	policies := 0
	for _, obj := range kustomizeBuild(t, filepath.Join(manifestsDir, "plugin")) {
		switch obj.GetKind() {
		case "Plugin":
			plugin = obj
			continue
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if !strings.HasPrefix(obj.GetName(), "sriov-udn-binding-plugin-hazard") {
				continue
			}
			policies++
		default:
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
		_, err = c.dynamic.Resource(mapping.Resource).Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err, "%s %s", gvk.Kind, obj.GetName())
	}
	require.Equal(t, 5, policies, "two policies and three bindings")
	require.NotNil(t, plugin, "manifests/plugin has our Plugin")

	coreVMI := func(t *testing.T) *unstructured.Unstructured {
		vmi := vmiFrom(t, exampleVM(t))
		withCoreSRIOV(t, vmi)
		return vmi
	}
	// until polls a dry-run create of build() until check accepts the result: policies and their params
	// reach the admission plugin through informers, some time after they are stored.
	until := func(t *testing.T, what string, build func(*testing.T) *unstructured.Unstructured, check func(result) bool) result {
		t.Helper()
		var last result
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			last = c.writeDryRun(t, build(t))
			return check(last), nil
		})
		require.NoError(t, err, "%s: last answer %v %v", what, last.err, last.warnings)
		return last
	}

	_, err = c.dynamic.Resource(pluginGVR).Create(ctx, plugin, metav1.CreateOptions{})
	require.NoError(t, err, "our Plugin %s", plugin.GetName())

	require.True(t, t.Run("with our Plugin: a core SR-IOV VMI is denied, naming the issue and the Plugin", func(t *testing.T) {
		got := until(t, "the hazard policy never denied", coreVMI, func(r result) bool { return r.err != nil })
		assert.Contains(t, got.err.Error(), "ValidatingAdmissionPolicy '"+hazardPolicy+"'")
		assert.Contains(t, got.err.Error(), "core SR-IOV interface (core)")
		assert.Contains(t, got.err.Error(), "kubevirt/kubevirt#18861")
		assert.Contains(t, got.err.Error(), "kubectl delete plugin "+plugin.GetName())
		t.Logf("denied: %v", got.err)
	}))
	t.Run("with our Plugin: our own VM and VMI pass untouched", func(t *testing.T) {
		for _, obj := range []*unstructured.Unstructured{exampleVM(t), vmiFrom(t, exampleVM(t))} {
			got := c.writeDryRun(t, obj)
			require.NoError(t, got.err, obj.GetKind())
			assert.Empty(t, got.warnings, obj.GetKind())
		}
	})
	t.Run("with our Plugin: a core SR-IOV VM is admitted with the warning, and can be stopped", func(t *testing.T) {
		vm := exampleVM(t)
		withCoreSRIOV(t, vm)
		got := c.write(t, vm, nil)
		require.NoError(t, got.err, "a VM is never denied: its owner must be able to stop, edit and delete it")
		require.Len(t, got.warnings, 1)
		assert.Contains(t, got.warnings[0], "binding '"+hazardVMBinding+"'")
		assert.Contains(t, got.warnings[0], "kubevirt/kubevirt#18861")
		stored := c.get(t, mapper, vm)
		stopped := stored.DeepCopy()
		require.NoError(t, unstructured.SetNestedField(stopped.Object, "Halted", "spec", "runStrategy"))
		unstructured.RemoveNestedField(stopped.Object, "spec", "running")
		got = c.write(t, stopped, stored)
		require.NoError(t, got.err, "stopping the VM")
		assert.Len(t, got.warnings, 1)
	})
	t.Run("with our Plugin: hostDevices are admitted with a warning (PCI or mediated: the KubeVirt CR says)", func(t *testing.T) {
		for _, kind := range []string{"VirtualMachine", "VirtualMachineInstance"} {
			obj := exampleVM(t)
			if kind == "VirtualMachineInstance" {
				obj = vmiFrom(t, obj)
			}
			withHostDevice(t, obj)
			got := c.writeDryRun(t, obj)
			require.NoError(t, got.err, kind)
			require.Len(t, got.warnings, 1, kind)
			assert.Contains(t, got.warnings[0], "ValidatingAdmissionPolicy '"+hazardHostdevices+"'", kind)
			assert.Contains(t, got.warnings[0], "hostDevices or gpus (nvme)", kind)
		}
	})

	require.NoError(t, c.dynamic.Resource(pluginGVR).Delete(ctx, plugin.GetName(), metav1.DeleteOptions{}))
	t.Run("the Plugin deleted: the core SR-IOV VMI is admitted again", func(t *testing.T) {
		got := until(t, "still denied after the Plugin was deleted", coreVMI, func(r result) bool { return r.err == nil })
		assert.Empty(t, got.warnings)
	})
}
