package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	bindingName  = "sriov-udn"
	vmNamespace  = "vm-workloads" // manifests/examples/namespace.yaml
	kvNamespace  = "kubevirt"
	kvName       = "kubevirt"
	mainPolicy   = "sriov-udn-binding.kubevirt.io"
	memlockName  = "sriov-udn-binding-memlock.kubevirt.io"
	podNICPolicy = "sriov-udn-binding-pod-nic-mac.kubevirt.io"
	mapName      = "sriov-udn-binding-podinfo.kubevirt.io"
	// podInfoMountedPolicy denies a launcher pod whose sidecar lacks the pod-info volume.
	podInfoMountedPolicy = "sriov-udn-binding-pod-info-mounted.kubevirt.io"
)

var (
	vmGVR  = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachines")
	vmiGVR = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachineinstances")
	kvGVR  = kubevirtv1.SchemeGroupVersion.WithResource("kubevirts")
	nadGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
)

// mapBindingGVR is the MutatingAdmissionPolicyBinding resource this server serves (v1beta1 on 1.34/1.35
// with the gate, v1 from 1.36).
func (c *cluster) mapBindingGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: c.k8s.mapVersion, Resource: "mutatingadmissionpolicybindings"}
}

// loadUnstructured reads the single object of a YAML file, as a user's kubectl would send it.
func loadUnstructured(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(data)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(js), file)
	return u
}

var objectCounter atomic.Int64

// uniqueName gives every object the suite creates its own name, so cases never collide.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, objectCounter.Add(1))
}

// vmiFrom turns a VM into the VMI its controller would create (same spec as the template).
func vmiFrom(t *testing.T, vm *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	spec, found, err := unstructured.NestedMap(vm.Object, "spec", "template", "spec")
	require.NoError(t, err)
	require.True(t, found)
	vmi := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	vmi.SetGroupVersionKind(kubevirtv1.VirtualMachineInstanceGroupVersionKind)
	vmi.SetName(vm.GetName())
	vmi.SetNamespace(vm.GetNamespace())
	return vmi
}

// toVMI converts what the server returned into KubeVirt's type.
func toVMI(t *testing.T, u *unstructured.Unstructured) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi))
	return vmi
}

// warnings collects the Warning headers of the responses of one client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// result is what the API server answered to one write: the error (nil if admitted) and its warnings.
type result struct {
	err      error
	warnings []string
}

// write sends one create (old == nil) or update through the API server, with its own warning recorder.
func (c *cluster) write(t *testing.T, obj *unstructured.Unstructured, old *unstructured.Unstructured) result {
	t.Helper()
	return c.send(t, obj, old, nil)
}

// writeDryRun sends a create that passes admission but is not stored.
func (c *cluster) writeDryRun(t *testing.T, obj *unstructured.Unstructured) result {
	t.Helper()
	return c.send(t, obj, nil, []string{metav1.DryRunAll})
}

func (c *cluster) send(t *testing.T, obj *unstructured.Unstructured, old *unstructured.Unstructured, dryRun []string) result {
	t.Helper()
	rec := &warnings{}
	config := rest.CopyConfig(c.config)
	config.WarningHandler = rec
	client, err := dynamic.NewForConfig(config)
	require.NoError(t, err)
	gvr := vmGVR
	if obj.GetKind() == kubevirtv1.VirtualMachineInstanceGroupVersionKind.Kind {
		gvr = vmiGVR
	}
	res := client.Resource(gvr).Namespace(obj.GetNamespace())
	if old == nil {
		_, err = res.Create(context.Background(), obj, metav1.CreateOptions{DryRun: dryRun})
	} else {
		obj = obj.DeepCopy()
		obj.SetResourceVersion(old.GetResourceVersion())
		_, err = res.Update(context.Background(), obj, metav1.UpdateOptions{DryRun: dryRun})
	}
	return result{err: err, warnings: rec.msgs}
}

// specOf returns the path prefix of the VMI spec inside obj.
func specOf(obj *unstructured.Unstructured) []string {
	if obj.GetKind() == "VirtualMachineInstance" {
		return []string{"spec"}
	}
	return []string{"spec", "template", "spec"}
}

func setField(t *testing.T, obj *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	require.NoError(t, unstructured.SetNestedField(obj.Object, value, append(specOf(obj), path...)...))
}

func removeField(obj *unstructured.Unstructured, path ...string) {
	unstructured.RemoveNestedField(obj.Object, append(specOf(obj), path...)...)
}

// keepVolumes keeps only the volumes for which keep is true.
func keepVolumes(t *testing.T, obj *unstructured.Unstructured, keep func(map[string]any) bool) {
	t.Helper()
	vols, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "volumes")...)
	require.NoError(t, err)
	var out []any
	for _, v := range vols {
		if keep(v.(map[string]any)) {
			out = append(out, v)
		}
	}
	setField(t, obj, out, "volumes")
}

func withoutCloudInit(t *testing.T, obj *unstructured.Unstructured) {
	keepVolumes(t, obj, func(v map[string]any) bool {
		_, noCloud := v["cloudInitNoCloud"]
		_, configDrive := v["cloudInitConfigDrive"]
		return !noCloud && !configDrive
	})
}

// withConfigDrive replaces the NoCloud volume with a ConfigDrive one (no networkData), keeping its disk name.
func withConfigDrive(t *testing.T, obj *unstructured.Unstructured) {
	withoutCloudInit(t, obj)
	vols, _, _ := unstructured.NestedSlice(obj.Object, append(specOf(obj), "volumes")...)
	vols = append(vols, map[string]any{"name": "cloudinitdisk", "cloudInitConfigDrive": map[string]any{"userData": "#cloud-config\n"}})
	setField(t, obj, vols, "volumes")
}

// withBinding replaces every binding interface by the given binding (or core bridge when "").
func withBinding(t *testing.T, obj *unstructured.Unstructured, name string) {
	t.Helper()
	ifaces, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "domain", "devices", "interfaces")...)
	require.NoError(t, err)
	for _, i := range ifaces {
		m := i.(map[string]any)
		if _, ok := m["binding"]; !ok {
			continue
		}
		delete(m, "binding")
		if name == "" {
			m["bridge"] = map[string]any{}
		} else {
			m["binding"] = map[string]any{"name": name}
		}
	}
	setField(t, obj, ifaces, "domain", "devices", "interfaces")
}

// editInterface applies edit to the interface called name (which must exist).
func editInterface(t *testing.T, obj *unstructured.Unstructured, name string, edit func(map[string]any)) {
	t.Helper()
	ifaces, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "domain", "devices", "interfaces")...)
	require.NoError(t, err)
	found := false
	for _, i := range ifaces {
		if m := i.(map[string]any); m["name"] == name {
			edit(m)
			found = true
		}
	}
	require.True(t, found, "interface %s", name)
	setField(t, obj, ifaces, "domain", "devices", "interfaces")
}

// editCloudInit applies edit to the source (cloudInitNoCloud or cloudInitConfigDrive) of every cloud-init volume.
func editCloudInit(t *testing.T, obj *unstructured.Unstructured, edit func(map[string]any)) {
	t.Helper()
	vols, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "volumes")...)
	require.NoError(t, err)
	found := false
	for _, v := range vols {
		for _, key := range []string{"cloudInitNoCloud", "cloudInitConfigDrive"} {
			if src, ok := v.(map[string]any)[key].(map[string]any); ok {
				edit(src)
				found = true
			}
		}
	}
	require.True(t, found, "no cloud-init volume")
	setField(t, obj, vols, "volumes")
}
