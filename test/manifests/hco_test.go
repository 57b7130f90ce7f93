package manifests_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The HyperConverged operator's API module (github.com/kubevirt/hyperconverged-cluster-operator/api) is not
// served by the Go module proxy these machines use (`go list -m -versions` answers 403), so its types cannot be
// imported. hyperConverged transcribes, from HCO v1.18.1 (tag v1.18.1, commit a7834653e3ea), the part of
// api/v1beta1/hyperconverged_types.go our manifest sets: the HyperConverged kind of hco.kubevirt.io/v1beta1 (its
// storage version, +kubebuilder:storageversion) and its spec field
//
//	// NetworkBinding defines the network binding plugins.
//	// Those bindings can be used when defining virtual machine interfaces.
//	// +optional
//	// +k8s:conversion-gen=false
//	NetworkBinding map[string]v1.InterfaceBindingPlugin `json:"networkBinding,omitempty"`
//
// whose value type is KubeVirt's own, from kubevirt.io/api v1.8.4: the version HCO v1.18.1's go.mod requires, and
// this module's. The strict decoder then rejects any field HCO does not have at that path, and any field of the
// binding that KubeVirt's type does not have. Every other HyperConverged field is left out on purpose: our
// manifest must not set one (HCO owns them), and the strict decoder refuses it if it does.
type hyperConverged struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              hyperConvergedSpec `json:"spec,omitempty"`
}

type hyperConvergedSpec struct {
	NetworkBinding map[string]kubevirtv1.InterfaceBindingPlugin `json:"networkBinding,omitempty"`
}

func (h *hyperConverged) DeepCopyObject() runtime.Object {
	out := *h
	h.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.NetworkBinding = map[string]kubevirtv1.InterfaceBindingPlugin{}
	for k, v := range h.Spec.NetworkBinding {
		out.Spec.NetworkBinding[k] = *v.DeepCopy()
	}
	return &out
}

var hyperConvergedGVK = schema.GroupVersionKind{Group: "hco.kubevirt.io", Version: "v1beta1", Kind: "HyperConverged"}

const (
	// HCO accepts one HyperConverged, of this name (v1.18.1 pkg/util/consts.go HyperConvergedName), and makes
	// the KubeVirt CR "kubevirt-" + that name in its own namespace (controllers/handlers/kubevirt.go
	// NewKubeVirtWithNameOnly).
	hcoName         = "kubevirt-hyperconverged"
	hcoKubeVirtName = "kubevirt-" + hcoName
	// OpenShift Virtualization's namespace, which manifests/hco and overlays/hco name.
	hcoNamespace = "openshift-cnv"
)

func checkHyperConverged(t *testing.T, h *hyperConverged) {
	t.Helper()
	assert.Equal(t, hcoName, h.Name)
	assert.Equal(t, hcoNamespace, h.Namespace)
	plugin, ok := h.Spec.NetworkBinding[bindingName]
	require.True(t, ok, "HyperConverged does not register binding %q in spec.networkBinding", bindingName)
	assert.NotEmpty(t, plugin.SidecarImage)
	assert.Equal(t, kubevirtv1.DeviceInfo, plugin.DownwardAPI)
	require.NotNil(t, plugin.ComputeResourceOverhead)
	assert.False(t, plugin.ComputeResourceOverhead.Requests.Memory().IsZero(), "computeResourceOverhead memory")
	assert.Nil(t, plugin.Migration, "the binding must not claim to be migratable: the VF is lost on migration")
}

// The HCO registration is the KubeVirt CR registration's binding, field for field: the same entry reaches the
// KubeVirt CR through HCO (which copies spec.networkBinding as it is).
func TestHCO_TheBindingIsTheKubeVirtRegistrationsBinding(t *testing.T) {
	var kv *kubevirtv1.KubeVirt
	for _, o := range build(t, filepath.Join(manifestsDir, "kubevirt", "device-info")) {
		if k, ok := o.(*kubevirtv1.KubeVirt); ok {
			kv = k
		}
	}
	require.NotNil(t, kv)
	var hc *hyperConverged
	for _, o := range build(t, filepath.Join(manifestsDir, "hco")) {
		if h, ok := o.(*hyperConverged); ok {
			hc = h
		}
	}
	require.NotNil(t, hc)
	assert.Equal(t, kv.Spec.Configuration.NetworkConfiguration.Binding[bindingName], hc.Spec.NetworkBinding[bindingName])
}

// overlays/hco: the policies and the pod-info projection; not the KubeVirt CR (HCO would revert it) nor the
// HyperConverged registration (a merge patch of its own); the VF migration policy reads the KubeVirt CR HCO makes.
func TestHCO_OverlayRegistersThroughHyperConverged_AndReadsHCOsKubeVirtCR(t *testing.T) {
	objs := build(t, filepath.Join(manifestsDir, "overlays", "hco"))
	var kinds []string
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
		if b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok && b.Name == "sriov-udn-binding-vf-migration.kubevirt.io" {
			binding = b
		}
	}
	assert.NotContains(t, kinds, "HyperConverged", "the registration is a merge patch, not applied")
	assert.Contains(t, kinds, "MutatingAdmissionPolicy")
	assert.NotContains(t, kinds, "KubeVirt", "HCO owns the KubeVirt CR and reverts direct edits")
	require.NotNil(t, binding)
	require.NotNil(t, binding.Spec.ParamRef)
	assert.Equal(t, hcoKubeVirtName, binding.Spec.ParamRef.Name)
	assert.Equal(t, hcoNamespace, binding.Spec.ParamRef.Namespace)
	// Every object but the VF migration binding is the stock entry point's.
	stock := map[string]runtime.Object{}
	for _, o := range build(t, manifestsDir) {
		stock[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.(metav1.Object).GetName()] = o
	}
	for _, o := range objs {
		key := o.GetObjectKind().GroupVersionKind().Kind + "/" + o.(metav1.Object).GetName()
		if o == runtime.Object(binding) {
			continue
		}
		assert.Equal(t, stock[key], o, "%s differs from manifests/'s", key)
	}
}

// images: reaches the HyperConverged CR's sidecarImage too (manifests/hco/kustomizeconfig.yaml).
func TestHCO_ImagesTransformerSetsSidecarImage(t *testing.T) {
	dir := userKustomization(t, filepath.Join(manifestsDir, "hco"), nil,
		"images:\n  - name: "+shippedImage+"\n    newName: registry.example.com/team/sriov-udn-binding\n    newTag: v0.1.0\n")
	var images []string
	for _, o := range build(t, dir) {
		if h, ok := o.(*hyperConverged); ok {
			images = append(images, h.Spec.NetworkBinding[bindingName].SidecarImage)
		}
	}
	assert.Equal(t, []string{"registry.example.com/team/sriov-udn-binding:v0.1.0"}, images)
}

// The transcription is strict: a misspelt field, a field HCO has elsewhere, or one KubeVirt's binding type
// lacks, fails.
func TestHCO_StrictDecodeRejectsWhatHCODoesNotHave(t *testing.T) {
	dec := strictDecoder(newScheme(t))
	for name, doc := range map[string]string{
		"a misspelt networkBinding": `{"apiVersion":"hco.kubevirt.io/v1beta1","kind":"HyperConverged","metadata":{"name":"x"},"spec":{"networkBindings":{}}}`,
		"an unknown binding field":  `{"apiVersion":"hco.kubevirt.io/v1beta1","kind":"HyperConverged","metadata":{"name":"x"},"spec":{"networkBinding":{"sriov-udn":{"sidecarimage":"x"}}}}`,
		"a field HCO owns":          `{"apiVersion":"hco.kubevirt.io/v1beta1","kind":"HyperConverged","metadata":{"name":"x"},"spec":{"featureGates":{}}}`,
	} {
		_, _, err := dec.Decode([]byte(doc), nil, nil)
		assert.Error(t, err, name)
	}
	obj, _, err := dec.Decode([]byte(`{"apiVersion":"hco.kubevirt.io/v1beta1","kind":"HyperConverged","metadata":{"name":"x"},"spec":{"networkBinding":{"b":{"sidecarImage":"i","downwardAPI":"device-info"}}}}`), nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "i", obj.(*hyperConverged).Spec.NetworkBinding["b"].SidecarImage)
}
