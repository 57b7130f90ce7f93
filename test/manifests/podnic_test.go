package manifests_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
)

const podNICPolicyName = "sriov-udn-binding-pod-nic-mac.kubevirt.io"

// loadPolicy returns the ValidatingAdmissionPolicy name and its bindings from policy/validating-policy.yaml.
func loadPolicy(t *testing.T, name string) (*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range loadFile(t, filepath.Join(manifestsDir, "policy", "validating-policy.yaml")) {
		switch p := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if p.Name == name {
				policy = p
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if p.Spec.PolicyName == name {
				bindings = append(bindings, p)
			}
		}
	}
	require.NotNil(t, policy, "policy %s", name)
	return policy, bindings
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

func TestPodNICPolicy_Verdicts(t *testing.T) {
	policy, _ := loadPolicy(t, podNICPolicyName)
	vap := compileVAP(t, policy)

	type mutation func(t *testing.T, obj *unstructured.Unstructured)
	podNIC := func(edit func(map[string]any)) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { editInterface(t, obj, "default", edit) }
	}
	cloudInit := func(edit func(map[string]any)) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { editCloudInit(t, obj, edit) }
	}
	noMAC := podNIC(func(m map[string]any) { delete(m, "macAddress") })
	noNetworkData := cloudInit(func(s map[string]any) { delete(s, "networkData") })
	networkData := func(key string, value any) mutation {
		return cloudInit(func(s map[string]any) { delete(s, "networkData"); s[key] = value })
	}
	binding := func(name string) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { withBinding(t, obj, name) }
	}
	configDrive := func(t *testing.T, obj *unstructured.Unstructured) { withConfigDrive(t, obj) }
	// renamePodNetwork gives the pod network and its interface another name than "default".
	renamePodNetwork := func(t *testing.T, obj *unstructured.Unstructured) {
		editInterface(t, obj, "default", func(m map[string]any) { m["name"] = "podnet" })
		nets, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "networks")...)
		require.NoError(t, err)
		for _, n := range nets {
			if m := n.(map[string]any); m["name"] == "default" {
				m["name"] = "podnet"
			}
		}
		setField(t, obj, nets, "networks")
	}
	// noPodNetwork leaves only the secondary networks.
	noPodNetwork := func(t *testing.T, obj *unstructured.Unstructured) {
		ifaces, _, _ := unstructured.NestedSlice(obj.Object, append(specOf(obj), "domain", "devices", "interfaces")...)
		nets, _, _ := unstructured.NestedSlice(obj.Object, append(specOf(obj), "networks")...)
		setField(t, obj, ifaces[1:], "domain", "devices", "interfaces")
		setField(t, obj, nets[1:], "networks")
	}
	// secondaryWithoutMAC: a secondary (Multus) network bridged by KubeVirt, without a MAC.
	secondaryWithoutMAC := func(t *testing.T, obj *unstructured.Unstructured) {
		editInterface(t, obj, "blue", func(m map[string]any) { delete(m, "binding"); m["bridge"] = map[string]any{} })
	}
	passt := podNIC(func(m map[string]any) { delete(m, "masquerade"); m["binding"] = map[string]any{"name": "passt"} })
	bridge := podNIC(func(m map[string]any) { delete(m, "masquerade"); m["bridge"] = map[string]any{} })
	const want = "interface default on the pod network has no macAddress and uses binding passt, whose MAC libvirt makes up " +
		"when the domain is defined: the sriov-udn sidecar writes the guest network config, which replaces cloud-init's DHCP " +
		"fallback, and must match that NIC by MAC before then; set macAddress, use masquerade or bridge, or give networkData"

	cases := []struct {
		name     string
		mutate   []mutation
		wantDeny bool
		wantMsg  string
	}{
		{name: "the shipped example VM (MAC and networkData) is admitted"},
		// The VM as people write it: served (DHCP matched by the pod interface's MAC).
		{name: "masquerade pod NIC without MAC and no networkData is admitted", mutate: []mutation{noMAC, noNetworkData}},
		{name: "bridge pod NIC without MAC and no networkData is admitted", mutate: []mutation{noMAC, noNetworkData, bridge}},
		{name: "the same with a config drive is admitted", mutate: []mutation{noMAC, configDrive}},
		{name: "a pod NIC with another binding plugin, no MAC, no networkData is denied", mutate: []mutation{noMAC, noNetworkData, passt},
			wantDeny: true, wantMsg: want},
		{name: "the same with a config drive is denied", mutate: []mutation{noMAC, configDrive, passt}, wantDeny: true, wantMsg: want},
		{name: "a blank networkData counts as none", mutate: []mutation{noMAC, passt, networkData("networkData", " \n")},
			wantDeny: true, wantMsg: want},
		{name: "the interface name comes from the VM", mutate: []mutation{noMAC, noNetworkData, passt, renamePodNetwork},
			wantDeny: true, wantMsg: "interface podnet on the pod network has no macAddress"},
		{name: "another plugin with macAddress set: admitted", mutate: []mutation{noNetworkData, passt}},
		{name: "another plugin with networkData, no MAC: admitted", mutate: []mutation{noMAC, passt}},
		{name: "networkDataBase64, no MAC: admitted", mutate: []mutation{noMAC, passt, networkData("networkDataBase64", "dmVyc2lvbjogMQo=")}},
		{name: "networkDataSecretRef, no MAC: admitted", mutate: []mutation{noMAC, passt,
			networkData("networkDataSecretRef", map[string]any{"name": "netdata"})}},
		{name: "config drive with networkData, no MAC: admitted", mutate: []mutation{noMAC, configDrive, passt,
			cloudInit(func(s map[string]any) { s["networkData"] = "version: 1\nconfig: []\n" })}},
		{name: "a pod interface bound to sriov-udn itself: admitted", mutate: []mutation{noMAC, noNetworkData,
			podNIC(func(m map[string]any) { delete(m, "masquerade"); m["binding"] = map[string]any{"name": bindingName} })}},
		{name: "a pod interface being unplugged (state absent): admitted", mutate: []mutation{noMAC, noNetworkData, passt,
			podNIC(func(m map[string]any) { m["state"] = "absent" })}},
		{name: "no pod network at all: admitted", mutate: []mutation{noPodNetwork, noNetworkData}},
		{name: "a secondary network without MAC is not the pod network: admitted", mutate: []mutation{noNetworkData, secondaryWithoutMAC}},
		{name: "a VM without our binding is not our business", mutate: []mutation{noMAC, noNetworkData, passt, binding("")}},
		{name: "a VM with another binding plugin is not our business", mutate: []mutation{noMAC, noNetworkData, passt, binding("passt")}},
	}
	for _, kind := range []string{"VirtualMachine", "VirtualMachineInstance"} {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				obj := exampleVM(t)
				if kind == "VirtualMachineInstance" {
					obj = vmiFrom(t, obj)
				}
				for _, m := range tc.mutate {
					m(t, obj)
				}
				got := vap.evaluate(t, admission.Create, obj, nil)
				assert.Equal(t, tc.wantDeny, got.denied, "messages: %v", got.messages)
				if tc.wantDeny {
					require.Len(t, got.messages, 1)
					assert.Contains(t, got.messages[0], tc.wantMsg)
				}
			})
		}
	}
}

func TestPodNICPolicy_VMUpdates(t *testing.T) {
	policy, _ := loadPolicy(t, podNICPolicyName)
	vap := compileVAP(t, policy)

	legacy := exampleVM(t)
	editInterface(t, legacy, "default", func(m map[string]any) {
		delete(m, "macAddress")
		delete(m, "masquerade")
		m["binding"] = map[string]any{"name": "passt"}
	})
	editCloudInit(t, legacy, func(s map[string]any) { delete(s, "networkData") })

	t.Run("an update that leaves the template alone is admitted", func(t *testing.T) {
		updated := legacy.DeepCopy()
		require.NoError(t, unstructured.SetNestedField(updated.Object, "Halted", "spec", "runStrategy"))
		assert.False(t, vap.evaluate(t, admission.Update, updated, legacy).denied)
	})
	t.Run("an update that changes the template is checked", func(t *testing.T) {
		updated := legacy.DeepCopy()
		setField(t, updated, "External", "evictionStrategy")
		assert.True(t, vap.evaluate(t, admission.Update, updated, legacy).denied)
	})
	t.Run("an update that sets the MAC is admitted", func(t *testing.T) {
		updated := legacy.DeepCopy()
		editInterface(t, updated, "default", func(m map[string]any) { m["macAddress"] = "02:00:00:00:00:0a" })
		assert.False(t, vap.evaluate(t, admission.Update, updated, legacy).denied)
	})
}

// What cannot be served fails at admission, never at VM start (issue 13): the binding denies.
func TestPodNICPolicy_Denies(t *testing.T) {
	policy, bindings := loadPolicy(t, podNICPolicyName)
	assert.Equal(t, admissionregistrationv1.Ignore, *policy.Spec.FailurePolicy)
	require.Len(t, bindings, 1)
	assert.Contains(t, bindings[0].Spec.ValidationActions, admissionregistrationv1.Deny)
}
