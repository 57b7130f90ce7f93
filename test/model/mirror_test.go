package model_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The sidecar decodes the VMI virt-launcher sends into its own mirror types (pkg/model/vmi.go) to
// stay lean. A VMI marshalled by KubeVirt's own types must decode with every field the sidecar
// reads, and each interface must keep its exact JSON for the interface cache.
func TestVMIMirror_ReadsWhatKubeVirtMarshals(t *testing.T) {
	boot := uint(2)
	kv := &kvv1.VirtualMachineInstance{
		TypeMeta: metav1.TypeMeta{Kind: "VirtualMachineInstance", APIVersion: "kubevirt.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: types.UID("5d0c6a1e-2b9f-4c61-9d0e-7f3b8c1a2e44"), Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"sriov-udn.kubevirt.io/windows-network-script": "true"}},
		Spec: kvv1.VirtualMachineInstanceSpec{
			Domain: kvv1.DomainSpec{Devices: kvv1.Devices{Interfaces: []kvv1.Interface{
				{Name: "default", InterfaceBindingMethod: kvv1.InterfaceBindingMethod{Masquerade: &kvv1.InterfaceMasquerade{}}},
				{Name: "vf1", Binding: &kvv1.PluginBinding{Name: "sriov-udn"}, MacAddress: "02:00:00:aa:01:01", PciAddress: "0000:07:00.0", BootOrder: &boot, Tag: "sriov", Model: "virtio"},
				{Name: "gone", Binding: &kvv1.PluginBinding{Name: "sriov-udn"}, State: kvv1.InterfaceStateAbsent},
			}}},
			Networks: []kvv1.Network{
				{Name: "default", NetworkSource: kvv1.NetworkSource{Pod: &kvv1.PodNetwork{}}},
				{Name: "vf1", NetworkSource: kvv1.NetworkSource{Multus: &kvv1.MultusNetwork{NetworkName: "ns1/l2", Default: false}}},
				{Name: "gone", NetworkSource: kvv1.NetworkSource{Multus: &kvv1.MultusNetwork{NetworkName: "l2b"}}},
			},
			Volumes: []kvv1.Volume{
				{Name: "nc", VolumeSource: kvv1.VolumeSource{CloudInitNoCloud: &kvv1.CloudInitNoCloudSource{UserData: "#cloud-config\n", NetworkData: "version: 2\n"}}},
				{Name: "cd", VolumeSource: kvv1.VolumeSource{CloudInitConfigDrive: &kvv1.CloudInitConfigDriveSource{NetworkData: `{"links":[]}`}}},
			},
		},
	}
	raw, err := json.Marshal(kv)
	require.NoError(t, err)
	vmi, err := model.DecodeVMI(raw)
	require.NoError(t, err)

	assert.Equal(t, "VirtualMachineInstance", vmi.Kind)
	assert.Equal(t, model.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: "5d0c6a1e-2b9f-4c61-9d0e-7f3b8c1a2e44",
		Annotations: map[string]string{"sriov-udn.kubevirt.io/windows-network-script": "true"}}, vmi.ObjectMeta)
	require.Len(t, vmi.Spec.Domain.Devices.Interfaces, 3)
	vf := vmi.Spec.Domain.Devices.Interfaces[1]
	assert.Equal(t, "vf1", vf.Name)
	assert.Equal(t, "02:00:00:aa:01:01", vf.MacAddress)
	assert.Equal(t, "0000:07:00.0", vf.PciAddress)
	require.NotNil(t, vf.BootOrder)
	assert.Equal(t, uint(2), *vf.BootOrder)
	require.NotNil(t, vf.Binding)
	assert.Equal(t, "sriov-udn", vf.Binding.Name)
	assert.Equal(t, model.InterfaceStateAbsent, vmi.Spec.Domain.Devices.Interfaces[2].State)
	for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
		want, err := json.Marshal(kv.Spec.Domain.Devices.Interfaces[i])
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(iface.Raw), "interface %s keeps its exact JSON (tag, model, ...)", iface.Name)
	}
	require.Len(t, vmi.Spec.Networks, 3)
	assert.NotNil(t, vmi.Spec.Networks[0].Pod)
	assert.Equal(t, &model.MultusNetwork{NetworkName: "ns1/l2"}, vmi.Spec.Networks[1].Multus)
	require.Len(t, vmi.Spec.Volumes, 2)
	assert.Equal(t, "version: 2\n", vmi.Spec.Volumes[0].CloudInitNoCloud.NetworkData)
	assert.Equal(t, `{"links":[]}`, vmi.Spec.Volumes[1].CloudInitConfigDrive.NetworkData)

	assert.Equal(t, []string{"vf1"}, model.BoundInterfaceNames(vmi, "sriov-udn"), "absent interfaces are not ours to wire")
}
