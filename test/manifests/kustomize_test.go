package manifests_test

import (
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// build runs `kustomize build dir` and strictly decodes every object of the result.
func build(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	dec := strictDecoder(newScheme(t))
	var objs []runtime.Object
	for _, res := range resMap.Resources() {
		data, err := res.AsYAML()
		require.NoError(t, err)
		obj, _, err := decodeManifest(dec, data)
		require.NoError(t, err, "kustomize build %s: %s", dir, res.CurId())
		objs = append(objs, obj)
	}
	return objs
}

func kindNames(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		acc, ok := o.(interface{ GetName() string })
		if !ok {
			continue
		}
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+acc.GetName())
	}
	sort.Strings(out)
	return out
}

func TestKustomize_EveryKustomizationBuilds(t *testing.T) {
	_, kustomizations := manifestFiles(t)
	for _, file := range kustomizations {
		dir := filepath.Dir(file)
		t.Run(dir, func(t *testing.T) {
			if filepath.Base(filepath.Dir(dir)) == "components" {
				// A Component is built only as part of a kustomization: on the default entry point.
				dir = userKustomization(t, manifestsDir, []string{dir}, "")
			}
			objs := build(t, dir)
			assert.NotEmpty(t, objs)
			for _, o := range objs {
				checkObject(t, o)
			}
		})
	}
}

func TestKustomize_OverlaysContainWhatTheirKubeVirtNeeds(t *testing.T) {
	policies := []string{
		"ValidatingAdmissionPolicy/sriov-udn-binding-memlock.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-migration.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-pod-info-mounted.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-pod-nic-mac.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-podinfo-pod.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-podinfo-volume.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-vf-migration.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-memlock.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-migration.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-pod-info-mounted.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-pod-nic-mac.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-podinfo-pod.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-podinfo-volume.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-vf-migration.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding.kubevirt.io",
	}
	withMAP := append([]string{
		"MutatingAdmissionPolicy/sriov-udn-binding-podinfo.kubevirt.io",
		"MutatingAdmissionPolicyBinding/sriov-udn-binding-podinfo.kubevirt.io",
	}, policies...)
	sort.Strings(withMAP)
	withPlugin := append([]string{
		"MutatingAdmissionPolicy/sriov-udn-binding-plugin.kubevirt.io",
		"MutatingAdmissionPolicyBinding/sriov-udn-binding-plugin.kubevirt.io",
		"Plugin/sriov-udn-binding",
		// The containment of the v1.9.0 Plugin CR hazard (kubevirt/kubevirt#18861, manifests/plugin/hazard-policy.yaml).
		"ValidatingAdmissionPolicy/sriov-udn-binding-plugin-hazard.kubevirt.io",
		"ValidatingAdmissionPolicy/sriov-udn-binding-plugin-hazard-hostdevices.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-plugin-hazard.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-plugin-hazard-vm.kubevirt.io",
		"ValidatingAdmissionPolicyBinding/sriov-udn-binding-plugin-hazard-hostdevices.kubevirt.io",
	}, withMAP...)
	sort.Strings(withPlugin)
	withoutMAP := slices.Clone(policies)
	sort.Strings(withoutMAP)
	deviceInfo := filepath.Join(manifestsDir, "kubevirt", "device-info")

	// Each entry point holds no KubeVirt CR (docs/install.md registers the binding with a merge patch of the
	// registration, so that nothing else of the CR is touched); its registration is exactly one.
	cases := []struct {
		dir            string
		registration   string
		wantObjects    []string
		wantDownward   kubevirtv1.NetworkBindingDownwardAPIType
		wantAttachment kubevirtv1.DomainAttachmentType
		wantImage      string
	}{
		{dir: manifestsDir, registration: deviceInfo, wantObjects: withMAP, wantDownward: kubevirtv1.DeviceInfo, wantImage: "ghcr.io/sriov-udn-binding/sriov-udn-binding:v0.1.0"},
		{dir: filepath.Join(manifestsDir, "overlays", "stock"), registration: deviceInfo, wantObjects: withMAP, wantDownward: kubevirtv1.DeviceInfo, wantImage: "ghcr.io/sriov-udn-binding/sriov-udn-binding:v0.1.0"},
		// KubeVirt mounts pod-info itself: a MAP would mount a second volume at the same path.
		{dir: filepath.Join(manifestsDir, "overlays", "pod-info"), registration: filepath.Join(manifestsDir, "kubevirt", "pod-info"), wantObjects: withoutMAP, wantDownward: "pod-info", wantImage: "ghcr.io/sriov-udn-binding/sriov-udn-binding:v0.1.0"},
		// stock plus the Plugin API domain hook (KubeVirt v1.9+, gate Plugins).
		{dir: filepath.Join(manifestsDir, "overlays", "plugin"), registration: deviceInfo, wantObjects: withPlugin, wantDownward: kubevirtv1.DeviceInfo, wantImage: "ghcr.io/sriov-udn-binding/sriov-udn-binding:v0.1.0"},
		{dir: filepath.Join(manifestsDir, "overlays", "e2e"), registration: filepath.Join(manifestsDir, "overlays", "e2e", "registration"), wantObjects: withMAP, wantDownward: kubevirtv1.DeviceInfo,
			wantAttachment: kubevirtv1.ManagedTap, wantImage: "docker.io/library/sriov-udn-binding:e2e"},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			assert.Equal(t, tc.wantObjects, kindNames(build(t, tc.dir)))
			reg := build(t, tc.registration)
			require.Equal(t, []string{"KubeVirt/kubevirt"}, kindNames(reg), "the registration %s", tc.registration)
			kv := reg[0].(*kubevirtv1.KubeVirt)
			assert.Equal(t, "kubevirt", kv.Namespace)
			plugin := kv.Spec.Configuration.NetworkConfiguration.Binding[bindingName]
			assert.Equal(t, tc.wantDownward, plugin.DownwardAPI)
			assert.Equal(t, tc.wantAttachment, plugin.DomainAttachmentType)
			assert.Equal(t, tc.wantImage, plugin.SidecarImage)
		})
	}
}
