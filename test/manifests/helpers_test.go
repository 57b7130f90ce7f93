package manifests_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Paths relative to this package's directory (go test runs in it).
var (
	manifestsDir     = filepath.Join("..", "..", "manifests")
	e2eTestdataDir   = filepath.Join("..", "e2e", "testdata")
	manifestRootDirs = []string{manifestsDir, e2eTestdataDir}
)

const bindingName = "sriov-udn"

// newScheme registers every API type the manifests may contain.
func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		appsv1.AddToScheme,
		policyv1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		admissionregistrationv1beta1.AddToScheme,
		kubevirtv1.AddToScheme,
		nadv1.AddToScheme,
	} {
		require.NoError(t, add(scheme))
	}
	// MutatingAdmissionPolicy v1 (GA in Kubernetes 1.36) is not in k8s.io/api v0.34, this module's version
	// (KubeVirt's pins). v1 has the fields of v1beta1 (KEP-3962 graduated it unchanged), so a v1 document is
	// decoded strictly into the v1beta1 types here: a field v1beta1 lacks fails; kube-apiserver 1.36.3 itself
	// validates the v1 objects in test/controlplane.
	gv := schema.GroupVersion{Group: admissionregistrationv1.GroupName, Version: "v1"}
	scheme.AddKnownTypeWithName(gv.WithKind("MutatingAdmissionPolicy"), &admissionregistrationv1beta1.MutatingAdmissionPolicy{})
	scheme.AddKnownTypeWithName(gv.WithKind("MutatingAdmissionPolicyBinding"), &admissionregistrationv1beta1.MutatingAdmissionPolicyBinding{})
	// The HyperConverged operator's CR, from a transcription of its type (hco_test.go says why and from where).
	scheme.AddKnownTypeWithName(hyperConvergedGVK, &hyperConverged{})
	return scheme
}

// pluginAPIGroup is KubeVirt's Plugin API (VEP-190), in kubevirt.io/api from v1.9.0 only. This module's
// base is v1.8.4, so it cannot import the type: test/plugin (pinned to v1.9.0) decodes manifests/plugin
// strictly into it, and decodeManifest here checks the rest of the document only.
const pluginAPIGroup = "plugin.kubevirt.io"

// crdOnlyGroups are the API groups of the examples' OVN-Kubernetes User Defined Networks and the SR-IOV
// Network Operator's node policy. Neither project publishes a Go module this one can require (the module
// proxy serves neither), so their objects are checked against the projects' own CRDs, with their OpenAPI
// schemas and CEL rules, by a server dry run on a real kube-apiserver (test/controlplane).
var crdOnlyGroups = map[string]bool{"k8s.ovn.org": true, "sriovnetwork.openshift.io": true, "cert-manager.io": true}

// decodeManifest decodes one object strictly, except a Plugin API object or an object of crdOnlyGroups,
// which it reads as unstructured.
func decodeManifest(dec runtime.Decoder, data []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	var u unstructured.Unstructured
	if err := yaml.Unmarshal(data, &u.Object); err == nil {
		if g := u.GroupVersionKind().Group; g == pluginAPIGroup || crdOnlyGroups[g] {
			gvk := u.GroupVersionKind()
			return &u, &gvk, nil
		}
	}
	return dec.Decode(data, nil, nil)
}

// strictDecoder rejects unknown and duplicate fields, as `kubectl apply --validate=strict` does.
func strictDecoder(scheme *runtime.Scheme) runtime.Decoder {
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// document is one YAML document of a manifest file.
type document struct {
	file  string
	index int
	data  []byte
}

// splitDocuments splits a multi-document YAML stream, dropping documents that are only comments.
func splitDocuments(file string, data []byte) ([]document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []document
	for i := 0; ; i++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
			continue
		}
		docs = append(docs, document{file: file, index: i, data: chunk})
	}
}

// manifestFiles lists every YAML file under the manifest roots, kustomization files apart (and leaves out
// kustomize's own transformer configurations).
func manifestFiles(t *testing.T) (resources, kustomizations []string) {
	t.Helper()
	for _, root := range manifestRootDirs {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch {
			case d.Name() == "kustomization.yaml":
				kustomizations = append(kustomizations, path)
			case d.Name() == "kustomizeconfig.yaml":
				// kustomize's transformer configuration (`configurations:`), not an API object.
			case strings.HasSuffix(d.Name(), ".yaml") || strings.HasSuffix(d.Name(), ".yml"):
				resources = append(resources, path)
			}
			return nil
		})
		require.NoError(t, err, "walk %s", root)
	}
	require.NotEmpty(t, resources)
	require.NotEmpty(t, kustomizations)
	return resources, kustomizations
}
