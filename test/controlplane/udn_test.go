package controlplane_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sriovOperatorNamespace is where manifests/examples/udn puts the SR-IOV Network Operator's node policy (the
// operator's own namespace on OpenShift, which exists before any example is applied).
const sriovOperatorNamespace = "openshift-sriov-network-operator"

// testUDNExamples sends every object of the User Defined Network examples, as kustomize builds them, to the
// server as a dry-run create: OVN-Kubernetes' and the SR-IOV operator's CRDs validate them with their own
// schemas and CEL rules, our admission policies judge the VM, and the answer must keep every field (a field
// a CRD does not know is pruned silently, which only the read-back shows). Each CRD's rules, and our policy,
// are shown to run by an object they refuse. (generated-nads.yaml is not sent: its NADs have the names of the
// example NADs the install step made, which a UDN user would not have; test/manifests checks it.)
func testUDNExamples(t *testing.T, c *cluster) {
	ctx := context.Background()
	mapper := c.restMapper(t)
	// Namespaces are made for real: a dry-run create of an object in a namespace that does not exist fails.
	// docs/install.md has the operator apply manifests/examples/namespace.yaml first (made by the install
	// step); the SR-IOV operator's namespace exists once it is installed.
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sriovOperatorNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var sent []*unstructured.Unstructured
	for _, dir := range []string{"udn", "udn-primary"} {
		for _, obj := range kustomizeBuild(t, filepath.Join(manifestsDir, "examples", dir)) {
			if obj.GetKind() == "Namespace" {
				_, err := c.dynamic.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Create(ctx, obj, metav1.CreateOptions{})
				require.NoError(t, err, "namespace %s", obj.GetName())
				continue
			}
			sent = append(sent, obj)
		}
	}
	kinds := map[string]int{}
	for _, obj := range sent {
		id := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
		t.Run(id, func(t *testing.T) {
			got, err := c.dryRunCreate(t, mapper, obj)
			require.NoError(t, err, "the server refused %s", id)
			assertStored(t, id, obj.Object, got.Object)
		})
		kinds[obj.GetKind()]++
	}
	assert.Equal(t, map[string]int{
		"SriovNetworkNodePolicy": 1, "UserDefinedNetwork": 2, "ClusterUserDefinedNetwork": 1,
		"VirtualMachine": 1,
	}, kinds, "the objects of the examples")

	// What each CRD and our policy refuse, so that the admissions above mean something.
	byKind := func(kind string) *unstructured.Unstructured {
		for _, obj := range sent {
			if obj.GetKind() == kind {
				return obj.DeepCopy()
			}
		}
		t.Fatalf("no %s in the examples", kind)
		return nil
	}
	refusals := []struct {
		name   string
		obj    *unstructured.Unstructured
		edit   func(map[string]any)
		reason string
	}{
		{"a localnet CUDN without physicalNetworkName (OpenAPI required)", byKind("ClusterUserDefinedNetwork"),
			func(o map[string]any) {
				unstructured.RemoveNestedField(o, "spec", "network", "localnet", "physicalNetworkName")
			},
			"physicalNetworkName: Required value"},
		{"a localnet CUDN whose excluded range is not a CIDR (CEL)", byKind("ClusterUserDefinedNetwork"),
			func(o map[string]any) {
				_ = unstructured.SetNestedStringSlice(o, []string{"192.168.100.1"}, "spec", "network", "localnet", "excludeSubnets")
			},
			"CIDR is invalid"},
		{"a UDN with the layer2 section missing (CEL)", byKind("UserDefinedNetwork"),
			func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "layer2") },
			"spec.layer2 is required when topology is Layer2"},
		{"a node policy with a device type the operator does not know (enum)", byKind("SriovNetworkNodePolicy"),
			func(o map[string]any) { _ = unstructured.SetNestedField(o, "vfio", "spec", "deviceType") },
			`spec.deviceType: Unsupported value: "vfio"`},
		{"the primary-UDN VM without its pod NIC's macAddress (our policy)", byKind("VirtualMachine"),
			func(o map[string]any) {
				ifaces, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "domain", "devices", "interfaces")
				delete(ifaces[0].(map[string]any), "macAddress")
				_ = unstructured.SetNestedSlice(o, ifaces, "spec", "template", "spec", "domain", "devices", "interfaces")
			},
			"sriov-udn-binding-pod-nic-mac.kubevirt.io"},
	}
	for _, r := range refusals {
		t.Run("refused: "+r.name, func(t *testing.T) {
			r.edit(r.obj.Object)
			_, err := c.dryRunCreate(t, mapper, r.obj)
			require.Error(t, err, "the server admitted %s", r.name)
			assert.Contains(t, err.Error(), r.reason)
		})
	}
}

// dryRunCreate sends obj as a create with dryRun=All and returns what the server would have stored.
func (c *cluster) dryRunCreate(t *testing.T, mapper meta.RESTMapper, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err, "%s", gvk)
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	res := c.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return res.Namespace(obj.GetNamespace()).Create(context.Background(), obj, opts)
	}
	return res.Create(context.Background(), obj, opts)
}
