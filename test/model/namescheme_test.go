// Package model_test checks pkg/model against KubeVirt's own code, which only this test module can import.
package model_test

import (
	"fmt"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	kvv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/network/namescheme"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
)

var networkNames = []string{
	"a", "blue", "red", "sriov", "sriov-net-1", "sriov_net_2", "UPPER-case", "net1", "default",
	"", "ns1/nad", "a-very-long-network-name-" + strings.Repeat("x", 200), "ünïcødé", "with space", "tab\there",
}

func TestHashedPodInterfaceName_EqualsKubeVirtGenerateHashedInterfaceName(t *testing.T) {
	for _, name := range networkNames {
		assert.Equal(t, namescheme.GenerateHashedInterfaceName(name), model.HashedPodInterfaceName(name), "network %q", name)
	}
}

// KubeVirt's scheme for a whole VMI (CreateHashedNetworkNameScheme) must give our bound interfaces the
// pod interface names Build reports.
func TestBuild_PodInterfaceNames_EqualKubeVirtNetworkNameScheme(t *testing.T) {
	vmi := &kvv1.VirtualMachineInstance{}
	vmi.Namespace = "ns1"
	for _, n := range []string{"sriov-a", "sriov-b", "blue"} {
		vmi.Spec.Networks = append(vmi.Spec.Networks, kvv1.Network{Name: n,
			NetworkSource: kvv1.NetworkSource{Multus: &kvv1.MultusNetwork{NetworkName: "nad-" + n}}})
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces,
			kvv1.Interface{Name: n, Binding: &kvv1.PluginBinding{Name: "sriov-udn"}})
	}
	want := namescheme.CreateHashedNetworkNameScheme(vmi.Spec.Networks)
	got, err := model.Build(kubevirtjson.VMI(t, vmi), nil, model.Options{BindingName: "sriov-udn"})
	assert.NoError(t, err)
	assert.Len(t, got, 3)
	for _, bi := range got {
		assert.Equal(t, want[bi.Network], bi.PodInterfaceName, "network %q", bi.Network)
	}
}

// On pods with legacy ordinal interface names (net1, net2, ...) KubeVirt switches to its ordinal
// scheme (CreateFromNetworkStatuses); Build must follow it.
func TestBuild_OrdinalPodInterfaceNames_EqualKubeVirtOrdinalScheme(t *testing.T) {
	vmi := &kvv1.VirtualMachineInstance{}
	vmi.Namespace = "ns1"
	vmi.Spec.Networks = append(vmi.Spec.Networks, kvv1.Network{Name: "default",
		NetworkSource: kvv1.NetworkSource{Pod: &kvv1.PodNetwork{}}})
	vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces,
		kvv1.Interface{Name: "default", InterfaceBindingMethod: kvv1.InterfaceBindingMethod{Masquerade: &kvv1.InterfaceMasquerade{}}})
	for _, n := range []string{"x", "sriov-a", "y", "sriov-b"} {
		vmi.Spec.Networks = append(vmi.Spec.Networks, kvv1.Network{Name: n,
			NetworkSource: kvv1.NetworkSource{Multus: &kvv1.MultusNetwork{NetworkName: "nad-" + n}}})
		iface := kvv1.Interface{Name: n, InterfaceBindingMethod: kvv1.InterfaceBindingMethod{SRIOV: &kvv1.InterfaceSRIOV{}}}
		if strings.HasPrefix(n, "sriov") {
			iface = kvv1.Interface{Name: n, Binding: &kvv1.PluginBinding{Name: "sriov-udn"}}
		}
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, iface)
	}
	want := namescheme.CreateOrdinalNetworkNameScheme(vmi.Spec.Networks)
	snap := &downwardapi.Snapshot{}
	var kvStatus []nadv1.NetworkStatus // KubeVirt's own type, for its own check
	for i, n := range vmi.Spec.Networks[1:] {
		snap.NetworkStatus = append(snap.NetworkStatus, downwardapi.NetworkStatus{Name: "ns1/nad-" + n.Name, Interface: want[n.Name], Mac: fmt.Sprintf("02:00:00:00:00:%02x", i+1)})
		kvStatus = append(kvStatus, nadv1.NetworkStatus{Name: "ns1/nad-" + n.Name, Interface: want[n.Name]})
	}
	assert.True(t, namescheme.PodHasOrdinalInterfaceName(kvStatus))
	mvmi := kubevirtjson.VMI(t, vmi)
	got, err := model.Build(mvmi, snap, model.Options{BindingName: "sriov-udn"})
	assert.NoError(t, err)
	assert.Len(t, got, 2)
	for _, bi := range got {
		assert.Equal(t, want[bi.Network], bi.PodInterfaceName, "network %q", bi.Network)
	}
	assert.Empty(t, model.MissingForCloudInit(mvmi, snap, model.Options{BindingName: "sriov-udn"}), "entries found by ordinal name")
}
