package manifests_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// shippedImage is the image name the KubeVirt CR registrations carry: what an `images:` entry names.
const shippedImage = "ghcr.io/sriov-udn-binding/sriov-udn-binding"

// sidecarImageOf returns the binding's sidecarImage of the one KubeVirt object in objs.
func sidecarImageOf(t *testing.T, dir string) string {
	t.Helper()
	var images []string
	for _, o := range build(t, dir) {
		if kv, ok := o.(*kubevirtv1.KubeVirt); ok {
			images = append(images, kv.Spec.Configuration.NetworkConfiguration.Binding[bindingName].SidecarImage)
		}
	}
	require.Len(t, images, 1, "kustomize build %s: KubeVirt objects", dir)
	return images[0]
}

// userKustomization writes, in a directory of its own, the kustomization an operator writes on top of an
// entry point (docs/install.md): the entry point as its resource, the given components (paths from this
// package), and extra (an `images:` entry, say).
func userKustomization(t *testing.T, entryPoint string, components []string, extra string) string {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes a base or a component outside the kustomization's root only as a relative path.
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		require.NoError(t, err)
		r, err := filepath.Rel(dir, abs)
		require.NoError(t, err)
		return r
	}
	body := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel(entryPoint) + "\n"
	if len(components) > 0 {
		body += "components:\n"
		for _, c := range components {
			body += "  - " + rel(c) + "\n"
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(body+extra), 0o644))
	return dir
}

// The images transformer does not know KubeVirt's sidecarImage; kubevirt/*/kustomizeconfig.yaml tells it,
// through the `configurations:` of the registrations, which kustomize merges into every kustomization built
// on them: an operator's `images:` (or `kustomize edit set image`) in their kustomization of a registration
// (docs/install.md step 3) then names their image.
func TestKustomize_ImagesTransformerSetsSidecarImage_OnEveryRegistration(t *testing.T) {
	entryPoints := []string{
		filepath.Join(manifestsDir, "kubevirt", "device-info"),
		filepath.Join(manifestsDir, "kubevirt", "pod-info"),
	}
	cases := []struct {
		name, images, want string
	}{
		{
			name:   "newName and newTag",
			images: "images:\n  - name: " + shippedImage + "\n    newName: registry.example.com/team/sriov-udn-binding\n    newTag: v0.1.0\n",
			want:   "registry.example.com/team/sriov-udn-binding:v0.1.0",
		},
		{
			name:   "a digest",
			images: "images:\n  - name: " + shippedImage + "\n    newName: registry.example.com/sriov-udn-binding\n    digest: sha256:0000000000000000000000000000000000000000000000000000000000000001\n",
			want:   "registry.example.com/sriov-udn-binding@sha256:0000000000000000000000000000000000000000000000000000000000000001",
		},
		{
			name:   "newTag only",
			images: "images:\n  - name: " + shippedImage + "\n    newTag: v0.2.0\n",
			want:   shippedImage + ":v0.2.0",
		},
	}
	for _, ep := range entryPoints {
		require.Equal(t, shippedImage+":v0.1.0", sidecarImageOf(t, ep), "%s as shipped", ep)
		for _, tc := range cases {
			t.Run(ep+"/"+tc.name, func(t *testing.T) {
				assert.Equal(t, tc.want, sidecarImageOf(t, userKustomization(t, ep, nil, tc.images)))
			})
		}
	}
}

// An `images:` entry for another image leaves ours alone: the transformer matches by name.
func TestKustomize_ImagesTransformer_OtherNameLeavesSidecarImage(t *testing.T) {
	dir := userKustomization(t, filepath.Join(manifestsDir, "kubevirt", "device-info"), nil, "images:\n  - name: quay.io/other/image\n    newTag: v9\n")
	assert.Equal(t, shippedImage+":v0.1.0", sidecarImageOf(t, dir))
}

// No entry point holds a KubeVirt or HyperConverged CR: `kubectl apply` of a partial CR drops every field of a CR
// made by `kubectl apply` that ours lacks, so the registration is a merge patch of its own (docs/install.md).
func TestKustomize_NoEntryPointHoldsTheCR(t *testing.T) {
	for _, ep := range []string{manifestsDir, "stock", "pod-info", "plugin", "hco", "e2e", "webhook", "hco-webhook"} {
		if ep != manifestsDir {
			ep = filepath.Join(manifestsDir, "overlays", ep)
		}
		for _, o := range build(t, ep) {
			kind := o.GetObjectKind().GroupVersionKind().Kind
			assert.NotContains(t, []string{"KubeVirt", "HyperConverged"}, kind, "%s holds a %s", ep, kind)
		}
	}
}

// Every registration carries the same transformer configuration, so no entry point loses it.
func TestKustomize_EveryRegistrationCarriesTheImagesConfiguration(t *testing.T) {
	regs, err := filepath.Glob(filepath.Join(manifestsDir, "kubevirt", "*", "kustomization.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, regs)
	var first []byte
	for _, k := range regs {
		data, err := os.ReadFile(k)
		require.NoError(t, err)
		assert.Contains(t, string(data), "configurations:\n  - kustomizeconfig.yaml", k)
		cfg, err := os.ReadFile(filepath.Join(filepath.Dir(k), "kustomizeconfig.yaml"))
		require.NoError(t, err)
		if first == nil {
			first = cfg
		}
		assert.Equal(t, string(first), string(cfg), "%s differs from %s", filepath.Join(filepath.Dir(k), "kustomizeconfig.yaml"), regs[0])
	}
}
