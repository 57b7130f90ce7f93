package manifests_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var kubernetes134 = filepath.Join(manifestsDir, "components", "kubernetes-1.34-1.35")

const (
	mapV1      = "admissionregistration.k8s.io/v1"
	mapV1beta1 = "admissionregistration.k8s.io/v1beta1"
)

// buildYAML runs `kustomize build dir` and returns each object as YAML, keyed by kind/name, with its apiVersion.
func buildYAML(t *testing.T, dir string) (objects map[string]string, apiVersions map[string]string) {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	objects, apiVersions = map[string]string{}, map[string]string{}
	for _, r := range resMap.Resources() {
		data, err := r.AsYAML()
		require.NoError(t, err)
		key := r.GetKind() + "/" + r.GetName()
		objects[key], apiVersions[key] = string(data), r.GetApiVersion()
	}
	return objects, apiVersions
}

func isMAP(key string) bool {
	return strings.HasPrefix(key, "MutatingAdmissionPolicy/") || strings.HasPrefix(key, "MutatingAdmissionPolicyBinding/")
}

// The manifests are written for Kubernetes 1.36+ (MutatingAdmissionPolicy GA, v1); the component gives every
// MutatingAdmissionPolicy and binding the v1beta1 of 1.34 and 1.35, and changes nothing else, on every entry
// point; objects that are not MutatingAdmissionPolicies stay byte for byte.
func TestKubernetes134Component_GivesEveryMAPv1beta1_AndChangesNothingElse(t *testing.T) {
	for _, ep := range []string{
		manifestsDir,
		filepath.Join(manifestsDir, "overlays", "stock"),
		filepath.Join(manifestsDir, "overlays", "plugin"),
		filepath.Join(manifestsDir, "overlays", "pod-info"),
	} {
		t.Run(ep, func(t *testing.T) {
			ga, gaVersions := buildYAML(t, ep)
			beta, betaVersions := buildYAML(t, userKustomization(t, ep, []string{kubernetes134}, ""))
			require.Equal(t, len(ga), len(beta), "the same objects")
			maps := 0
			for key, obj := range ga {
				require.Contains(t, beta, key)
				if !isMAP(key) {
					assert.Equal(t, obj, beta[key], "%s changed by the component", key)
					continue
				}
				maps++
				assert.Equal(t, mapV1, gaVersions[key], "%s as shipped (Kubernetes 1.36+)", key)
				assert.Equal(t, mapV1beta1, betaVersions[key], "%s with the component", key)
				assert.Equal(t, strings.Replace(obj, "apiVersion: "+mapV1+"\n", "apiVersion: "+mapV1beta1+"\n", 1), beta[key],
					"%s: the component changes its apiVersion only", key)
			}
			if filepath.Base(ep) == "pod-info" {
				assert.Zero(t, maps, "KubeVirt mounts pod-info itself: no MutatingAdmissionPolicy")
			} else {
				assert.NotZero(t, maps)
			}
			// And the result decodes strictly as v1beta1 (the real types of Kubernetes 1.34).
			build(t, userKustomization(t, ep, []string{kubernetes134}, ""))
		})
	}
}

// Every MutatingAdmissionPolicy in the repository's files is v1; v1beta1 comes only through the component
// (and the e2e overlay, whose kind node runs Kubernetes 1.34, uses it).
func TestManifests_MutatingAdmissionPoliciesAreV1_BetaOnlyThroughTheComponent(t *testing.T) {
	resources, _ := manifestFiles(t)
	seen := 0
	for _, file := range resources {
		_, versions := decodeFileKinds(t, file)
		for key, v := range versions {
			if isMAP(key) {
				seen++
				assert.Equal(t, mapV1, v, "%s: %s", file, key)
			}
		}
	}
	assert.Equal(t, 4, seen, "podinfo-policy and plugin: a policy and a binding each")
	_, e2e := buildYAML(t, filepath.Join(manifestsDir, "overlays", "e2e"))
	for key, v := range e2e {
		if isMAP(key) {
			assert.Equal(t, mapV1beta1, v, "overlays/e2e (kind, Kubernetes 1.34): %s", key)
		}
	}
}

// decodeFileKinds reads the objects of one manifest file: kind/name -> apiVersion.
func decodeFileKinds(t *testing.T, file string) ([]string, map[string]string) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	docs, err := splitDocuments(file, data)
	require.NoError(t, err)
	var keys []string
	versions := map[string]string{}
	for _, d := range docs {
		var u unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal(d.data, &u.Object), "%s document %d", file, d.index)
		key := u.GetKind() + "/" + u.GetName()
		keys = append(keys, key)
		versions[key] = u.GetAPIVersion()
	}
	return keys, versions
}
