package manifests_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ovnkCNIVersion is the cniVersion OVN-Kubernetes writes into the NADs it generates (go-controller/pkg/config
// cni.go CNISpecVersion, from v1.3.0 on).
const ovnkCNIVersion = "1.1.0"

// renderedNAD is the NAD OVN-Kubernetes' UDN controller generates in namespace for a UserDefinedNetwork or
// ClusterUserDefinedNetwork, by the rules of go-controller/pkg/clustermanager/userdefinednetwork/template
// (net-attach-def-template.go): the object's labels plus OVN-K's own, its annotations but k8s.ovn.org/
// ones, and a CNI config that is json.Marshal of a map (compact, keys sorted) holding only the fields set.
func renderedNAD(t *testing.T, udn *unstructured.Unstructured, namespace string) (meta map[string]any, config string) {
	t.Helper()
	topologyPath := []string{"spec"}
	network := namespace + "_" + udn.GetName()
	if udn.GetKind() == "ClusterUserDefinedNetwork" {
		topologyPath = []string{"spec", "network"}
		network = "cluster_udn_" + udn.GetName()
	}
	topology, _, err := unstructured.NestedString(udn.Object, append(topologyPath, "topology")...)
	require.NoError(t, err)
	spec, found, err := unstructured.NestedMap(udn.Object, append(topologyPath, strings.ToLower(topology))...)
	require.NoError(t, err)
	require.True(t, found, "%s: no %s section for topology %s", udn.GetName(), strings.ToLower(topology), topology)

	conf := map[string]any{
		"cniVersion":       ovnkCNIVersion,
		"type":             "ovn-k8s-cni-overlay",
		"name":             network,
		"netAttachDefName": namespace + "/" + udn.GetName(),
		"topology":         strings.ToLower(topology),
		"role":             strings.ToLower(spec["role"].(string)),
	}
	joined := func(field string) string {
		list, _, err := unstructured.NestedStringSlice(spec, field)
		require.NoError(t, err, "%s.%s", udn.GetName(), field)
		return strings.Join(list, ",")
	}
	for _, field := range []string{"subnets", "excludeSubnets"} {
		if s := joined(field); s != "" {
			conf[field] = s
		}
	}
	mtu := number(t, spec, "mtu")
	if mtu == 0 && topology == "Localnet" {
		mtu = 1500 // OVN-K's default MTU plus the overlay's 100, which a localnet network does not carry
	}
	if mtu > 0 {
		conf["mtu"] = mtu
	}
	if lifecycle, _, _ := unstructured.NestedString(spec, "ipam", "lifecycle"); lifecycle == "Persistent" {
		conf["allowPersistentIPs"] = true
	}
	if name, _, _ := unstructured.NestedString(spec, "physicalNetworkName"); name != "" {
		conf["physicalNetworkName"] = name
	}
	if id := number(t, spec, "vlan", "access", "id"); id != 0 {
		conf["vlanID"] = id
	}
	data, err := json.Marshal(conf)
	require.NoError(t, err)

	labels := map[string]any{"k8s.ovn.org/user-defined-network": ""}
	for k, v := range udn.GetLabels() {
		labels[k] = v
	}
	annotations := map[string]any{}
	for k, v := range udn.GetAnnotations() {
		if !strings.HasPrefix(k, "k8s.ovn.org/") {
			annotations[k] = v
		}
	}
	return map[string]any{"labels": labels, "annotations": annotations}, string(data)
}

// manifests/examples/udn/generated-nads.yaml shows users the NADs OVN-K makes from the example UDNs. It must
// be exactly what OVN-K renders from them as kustomize builds them, so that it cannot drift from the UDNs.
func TestUDNExamples_GeneratedNADsAreWhatOVNKubernetesRendersFromTheUDNs(t *testing.T) {
	dir := filepath.Join(manifestsDir, "examples", "udn")
	data, err := os.ReadFile(filepath.Join(dir, "generated-nads.yaml"))
	require.NoError(t, err)
	docs, err := splitDocuments("generated-nads.yaml", data)
	require.NoError(t, err)
	dec := strictDecoder(newScheme(t))
	shown := map[string]*nadv1.NetworkAttachmentDefinition{}
	for _, d := range docs {
		obj, _, err := decodeManifest(dec, d.data)
		require.NoError(t, err, "document %d", d.index)
		nad, ok := obj.(*nadv1.NetworkAttachmentDefinition)
		require.True(t, ok, "document %d is a %T, want a NetworkAttachmentDefinition", d.index, obj)
		shown[nad.Namespace+"/"+nad.Name] = nad
	}

	rendered := 0
	for _, o := range build(t, dir) {
		udn, ok := o.(*unstructured.Unstructured)
		if !ok || udn.GroupVersionKind().Group != "k8s.ovn.org" {
			continue
		}
		namespace := udn.GetNamespace()
		if udn.GetKind() == "ClusterUserDefinedNetwork" {
			namespace = "vm-workloads" // the namespace generated-nads.yaml shows; the selector must pick it
			assert.Contains(t, selectedNames(t, udn), namespace, "%s does not select %s", udn.GetName(), namespace)
		}
		key := namespace + "/" + udn.GetName()
		t.Run(key, func(t *testing.T) {
			nad, ok := shown[key]
			require.True(t, ok, "generated-nads.yaml lacks the NAD OVN-K makes for %s %s", udn.GetKind(), udn.GetName())
			wantMeta, wantConfig := renderedNAD(t, udn, namespace)
			assert.Equal(t, wantConfig, nad.Spec.Config, "spec.config")
			assert.Equal(t, wantMeta["labels"], toAny(nad.Labels), "labels")
			assert.Equal(t, wantMeta["annotations"], toAny(nad.Annotations), "annotations")
			assert.Equal(t, []string{"k8s.ovn.org/user-defined-network-protection"}, nad.Finalizers, "finalizers")
			assert.NotEmpty(t, nad.Annotations["k8s.v1.cni.cncf.io/resourceName"], "without the resourceName Multus asks for no VF")
		})
		rendered++
	}
	assert.Len(t, shown, rendered, "generated-nads.yaml shows a NAD no example UDN makes")
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// number reads an integer field of a kustomize-built object (JSON numbers decode as float64 or int64).
func number(t *testing.T, obj map[string]any, path ...string) int64 {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	require.NoError(t, err)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case nil:
		require.False(t, found, "%v: null", path)
		return 0
	}
	t.Fatalf("%v: %T, want a number", path, v)
	return 0
}

// selectedNames lists the namespace names a ClusterUserDefinedNetwork's selector names (In expressions on
// kubernetes.io/metadata.name, as the example writes it).
func selectedNames(t *testing.T, cudn *unstructured.Unstructured) []string {
	t.Helper()
	exprs, _, err := unstructured.NestedSlice(cudn.Object, "spec", "namespaceSelector", "matchExpressions")
	require.NoError(t, err)
	var out []string
	for _, e := range exprs {
		expr := e.(map[string]any)
		if expr["key"] != "kubernetes.io/metadata.name" || expr["operator"] != "In" {
			continue
		}
		for _, v := range expr["values"].([]any) {
			out = append(out, v.(string))
		}
	}
	return out
}
