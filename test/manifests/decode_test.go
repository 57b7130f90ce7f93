package manifests_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

func TestManifests_EveryDocumentDecodesStrictlyIntoItsAPIType(t *testing.T) {
	resources, kustomizations := manifestFiles(t)
	dec := strictDecoder(newScheme(t))
	for _, file := range resources {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			docs, err := splitDocuments(file, data)
			require.NoError(t, err)
			require.NotEmpty(t, docs, "a manifest file with no object")
			for _, d := range docs {
				obj, gvk, err := decodeManifest(dec, d.data)
				require.NoError(t, err, "document %d", d.index)
				assert.NotEmpty(t, gvk.Kind, "document %d", d.index)
				checkObject(t, obj)
			}
		})
	}
	for _, file := range kustomizations {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			var k kustypes.Kustomization
			require.NoError(t, yaml.UnmarshalStrict(data, &k))
			if filepath.Base(filepath.Dir(filepath.Dir(file))) == "components" {
				assert.Equal(t, kustypes.ComponentKind, k.Kind)
			} else {
				assert.Equal(t, kustypes.KustomizationKind, k.Kind)
			}
			for _, r := range k.Resources {
				_, err := os.Stat(filepath.Join(filepath.Dir(file), r))
				assert.NoError(t, err, "resource %q", r)
			}
		})
	}
}

// The strict decoder is what makes the test above worth anything: prove it rejects a typo.
func TestStrictDecoder_RejectsUnknownAndDuplicateFields(t *testing.T) {
	dec := strictDecoder(newScheme(t))
	cases := map[string]string{
		"unknown field in a KubeVirt binding": `
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    network:
      binding:
        sriov-udn: {sidecarImage: x, downwardApi: device-info}
`,
		"unknown field in a VAP": `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  validation: [{expression: "true"}]
`,
		"duplicate field in a NAD": `
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: n, name: m}
spec: {config: "{}"}
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := dec.Decode([]byte(doc), nil, nil)
			require.Error(t, err)
			assert.True(t, runtime.IsStrictDecodingError(err), "want a strict decoding error, got %v", err)
		})
	}
}

// checkObject checks what the types cannot: values that must agree with each other or with the
// sidecar's defaults.
func checkObject(t *testing.T, obj runtime.Object) {
	t.Helper()
	switch o := obj.(type) {
	case *nadv1.NetworkAttachmentDefinition:
		checkNAD(t, o)
	case *kubevirtv1.KubeVirt:
		plugin, ok := o.Spec.Configuration.NetworkConfiguration.Binding[bindingName]
		require.True(t, ok, "KubeVirt CR does not register binding %q", bindingName)
		assert.NotEmpty(t, plugin.SidecarImage)
		assert.Contains(t, []kubevirtv1.NetworkBindingDownwardAPIType{kubevirtv1.DeviceInfo, "pod-info"}, plugin.DownwardAPI)
		require.NotNil(t, plugin.ComputeResourceOverhead)
		assert.False(t, plugin.ComputeResourceOverhead.Requests.Memory().IsZero(), "computeResourceOverhead memory")
		assert.Nil(t, plugin.Migration, "the binding must not claim to be migratable: the VF is lost on migration")
	case *hyperConverged:
		checkHyperConverged(t, o)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		assert.NotEmpty(t, o.Spec.ValidationActions)
	case *admissionregistrationv1beta1.MutatingAdmissionPolicy:
		require.NotNil(t, o.Spec.MatchConstraints)
		require.NotNil(t, o.Spec.MatchConstraints.ObjectSelector)
		assert.Equal(t, map[string]string{"kubevirt.io": "virt-launcher"}, o.Spec.MatchConstraints.ObjectSelector.MatchLabels)
	case *kubevirtv1.VirtualMachine:
		require.NotNil(t, o.Spec.Template)
		podNetwork := map[string]bool{}
		for _, n := range o.Spec.Template.Spec.Networks {
			podNetwork[n.Name] = n.Pod != nil
		}
		for _, iface := range o.Spec.Template.Spec.Domain.Devices.Interfaces {
			if iface.Binding == nil {
				continue
			}
			// The one other plugin an example may use: l2bridge, on a primary UDN's pod network.
			if podNetwork[iface.Name] && iface.Binding.Name == "l2bridge" {
				assert.NotEmpty(t, iface.MacAddress, "interface %s: a plugin-bound pod NIC needs a macAddress (sriov-udn-binding-pod-nic-mac)", iface.Name)
				continue
			}
			assert.Equal(t, bindingName, iface.Binding.Name, "interface %s", iface.Name)
		}
	}
}

// ovnNetConf is the subset of OVN-Kubernetes' NetConf (go-controller/pkg/cni/types) the examples use;
// decoding with unknown fields rejected catches a misspelt key that OVN-K would silently ignore.
type ovnNetConf struct {
	CNIVersion          string `json:"cniVersion"`
	Name                string `json:"name"`
	Type                string `json:"type"`
	Topology            string `json:"topology"`
	Subnets             string `json:"subnets,omitempty"`
	ExcludeSubnets      string `json:"excludeSubnets,omitempty"`
	MTU                 int    `json:"mtu,omitempty"`
	VLANID              int    `json:"vlanID,omitempty"`
	PhysicalNetworkName string `json:"physicalNetworkName,omitempty"`
	NADName             string `json:"netAttachDefName"`
	AllowPersistentIPs  bool   `json:"allowPersistentIPs,omitempty"`
	Role                string `json:"role,omitempty"`
}

// bridgeNetConf is the subset of the reference bridge plugin's config the e2e stand-in uses.
type bridgeNetConf struct {
	CNIVersion   string          `json:"cniVersion"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Bridge       string          `json:"bridge"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	IPAM         struct {
		Type      string `json:"type"`
		Addresses []struct {
			Address string `json:"address"`
			Gateway string `json:"gateway,omitempty"`
		} `json:"addresses"`
	} `json:"ipam"`
}

func checkNAD(t *testing.T, nad *nadv1.NetworkAttachmentDefinition) {
	t.Helper()
	var head struct {
		Type string `json:"type"`
	}
	require.NoError(t, json.Unmarshal([]byte(nad.Spec.Config), &head), "NAD %s spec.config", nad.Name)
	strict := func(v any) error {
		d := json.NewDecoder(bytes.NewReader([]byte(nad.Spec.Config)))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	switch head.Type {
	case "ovn-k8s-cni-overlay":
		var conf ovnNetConf
		require.NoError(t, strict(&conf), "NAD %s spec.config", nad.Name)
		assert.Equal(t, fmt.Sprintf("%s/%s", nad.Namespace, nad.Name), conf.NADName, "netAttachDefName must be <namespace>/<name>")
		assert.Contains(t, []string{"layer2", "localnet"}, conf.Topology)
		assert.NotEmpty(t, conf.CNIVersion)
		assert.NotEmpty(t, nad.Annotations["k8s.v1.cni.cncf.io/resourceName"], "an SR-IOV backed NAD needs the resourceName annotation")
		if conf.Topology == "localnet" {
			assert.NotEmpty(t, conf.PhysicalNetworkName)
		}
	case "bridge":
		var conf bridgeNetConf
		require.NoError(t, strict(&conf), "NAD %s spec.config", nad.Name)
		assert.True(t, conf.Capabilities["mac"], "KubeVirt passes the interface MAC as a runtime capability")
		assert.True(t, strings.HasPrefix(conf.IPAM.Type, "static"))
	default:
		t.Errorf("NAD %s: unexpected CNI type %q", nad.Name, head.Type)
	}
}
