package model_test

import (
	"encoding/json"
	"reflect"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kvv1 "kubevirt.io/api/core/v1"
	kvdownwardapi "kubevirt.io/kubevirt/pkg/network/downwardapi"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The device-info file is KubeVirt's kubevirt.io/network-info annotation, written by virt-controller's
// own generator (pkg/network/downwardapi/networkinfo.go CreateNetworkInfoAnnotationValue). Run against
// each KubeVirt version of the matrix, this feeds that generator's output to our parser and model: our
// type must keep every field KubeVirt writes (v1.9 adds mtu), and the guest NIC must get the MAC and,
// where the version writes it, the MTU.
func TestNetworkInfo_FromKubeVirtsOwnGenerator_ReachesTheModel(t *testing.T) {
	statuses := map[string]nadv1.NetworkStatus{
		"vf1": {Name: "ns1/l2", Interface: "pod16477688c0e", Mac: "02:00:00:aa:01:01", Mtu: 9000,
			DeviceInfo: &nadv1.DeviceInfo{Type: nadv1.DeviceInfoTypePCI, Version: "1.1.0", Pci: &nadv1.PciDevice{PciAddress: "0000:65:00.2"}}},
	}
	value := kvdownwardapi.CreateNetworkInfoAnnotationValue(statuses)
	require.NotEmpty(t, value)

	ours, err := downwardapi.ParseNetworkInfo("/etc/podinfo/network-info", []byte(value))
	require.NoError(t, err)
	var theirs kvdownwardapi.NetworkInfo
	require.NoError(t, json.Unmarshal([]byte(value), &theirs))
	ourJSON, err := json.Marshal(ours)
	require.NoError(t, err)
	theirJSON, err := json.Marshal(theirs)
	require.NoError(t, err)
	assert.JSONEq(t, string(theirJSON), string(ourJSON), "our NetworkInfo drops or renames a field KubeVirt writes")

	_, writesMTU := reflect.TypeOf(kvdownwardapi.Interface{}).FieldByName("Mtu")
	t.Logf("KubeVirt's network-info carries mtu: %v (%s)", writesMTU, value)
	wantMTU := 0
	if writesMTU {
		wantMTU = 9000
	}

	vmi := &kvv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{Kind: "VirtualMachineInstance", APIVersion: "kubevirt.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: "uid-1"},
		Spec: kvv1.VirtualMachineInstanceSpec{
			Domain:   kvv1.DomainSpec{Devices: kvv1.Devices{Interfaces: []kvv1.Interface{{Name: "vf1", Binding: &kvv1.PluginBinding{Name: "sriov-udn"}}}}},
			Networks: []kvv1.Network{{Name: "vf1", NetworkSource: kvv1.NetworkSource{Multus: &kvv1.MultusNetwork{NetworkName: "ns1/l2"}}}},
		},
	}
	raw, err := json.Marshal(vmi)
	require.NoError(t, err)
	decoded, err := model.DecodeVMI(raw)
	require.NoError(t, err)

	// device-info only: the stock KubeVirt layout without the pod-info policy, where network-info is
	// the only source of MAC and MTU.
	got, err := model.Build(decoded, &downwardapi.Snapshot{DeviceInfo: ours}, model.Options{BindingName: "sriov-udn"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "02:00:00:aa:01:01", got[0].MAC.String())
	assert.Equal(t, model.MACFromNetworkInfo, got[0].MACSource)
	assert.Equal(t, "0000:65:00.2", got[0].HostPCIAddress)
	assert.Equal(t, wantMTU, got[0].MTU)
}
