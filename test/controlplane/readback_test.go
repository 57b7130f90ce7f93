package controlplane_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeBuild is `kustomize build dir`: the objects `kubectl apply -k dir` sends.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	var out []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		// Through JSON, as kubectl sends it: numbers become int64 as in what the server returns.
		js, err := res.MarshalJSON()
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(js), "%s", res.CurId())
		out = append(out, u)
	}
	return out
}

// restMapper maps kinds to resources by asking the server (discovery), so CRDs are known.
func (c *cluster) restMapper(t *testing.T) meta.RESTMapper {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.config)
	require.NoError(t, err)
	groups, err := restmapper.GetAPIGroupResources(dc)
	require.NoError(t, err)
	return restmapper.NewDiscoveryRESTMapper(groups)
}

// get reads back what the server stored for obj.
func (c *cluster) get(t *testing.T, mapper meta.RESTMapper, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err, "%s", gvk)
	var res = c.dynamic.Resource(mapping.Resource)
	var stored *unstructured.Unstructured
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		stored, err = res.Namespace(obj.GetNamespace()).Get(context.Background(), obj.GetName(), metav1.GetOptions{})
	} else {
		stored, err = res.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
	}
	require.NoError(t, err, "get %s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
	return stored
}

// assertStored checks that every field of want is in got with the same value: the server accepted the
// manifest without pruning a field (an unknown field in a CRD-backed object is dropped silently) or
// changing a value. Lists must have the same length. The server may add fields (defaults, status).
func assertStored(t *testing.T, where string, want, got any) bool {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !assert.True(t, ok, "%s: stored %T, want an object", where, got) {
			return false
		}
		okAll := true
		for k, wv := range w {
			gv, present := g[k]
			if !assert.True(t, present, "%s.%s: not stored (pruned?)", where, k) {
				okAll = false
				continue
			}
			okAll = assertStored(t, where+"."+k, wv, gv) && okAll
		}
		return okAll
	case []any:
		g, ok := got.([]any)
		if !assert.True(t, ok, "%s: stored %T, want a list", where, got) || !assert.Len(t, g, len(w), "%s", where) {
			return false
		}
		okAll := true
		for i := range w {
			okAll = assertStored(t, fmt.Sprintf("%s[%d]", where, i), w[i], g[i]) && okAll
		}
		return okAll
	default:
		return assert.Equal(t, want, got, "%s", where)
	}
}

// assertAllStored reads back every object of the kustomization and compares it with what was sent.
func (c *cluster) assertAllStored(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	mapper := c.restMapper(t)
	for _, obj := range objs {
		stored := c.get(t, mapper, obj)
		assertStored(t, obj.GetKind()+"/"+obj.GetName(), obj.Object, stored.Object)
	}
}
