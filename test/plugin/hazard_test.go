package plugin

import (
	"encoding/xml"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "kubevirt.io/api/core/v1"
	pluginv1alpha1 "kubevirt.io/api/plugin/v1alpha1"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice/sriov"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/plugins"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// pciPool is the PCI address pool virt-launcher reads from network-info (hostdevice.AddressPooler): one
// address per network.
type pciPool map[string]string

func (p pciPool) Pop(network string) (string, error) {
	a, ok := p[network]
	if !ok {
		return "", fmt.Errorf("no PCI address for %s", network)
	}
	delete(p, network)
	return a, nil
}

// coreSRIOVVMI is a VMI of another tenant: KubeVirt's own SR-IOV binding, nothing of ours.
func coreSRIOVVMI() *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: k8smeta.ObjectMeta{Name: "vm-core-sriov", Namespace: "tenant-b", UID: "2c1b6f0e-0000-4000-8000-0000000000b1"}}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "sriov-net", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}}
	vmi.Spec.Networks = []v1.Network{{Name: "sriov-net", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "tenant-b/sriov-nad"}}}}
	return vmi
}

// coreSRIOVDomain is the domain virt-launcher v1.9.0 builds for vmi before the hooks: the core SR-IOV hostdev
// from KubeVirt's own sriov.CreateHostDevicesFromIfacesAndPool (hostdevice/hostdev.go createPCIHostDevice:
// type pci, managed no, no mode).
func coreSRIOVDomain(t *testing.T, vmi *v1.VirtualMachineInstance) *api.DomainSpec {
	t.Helper()
	hostdevs, err := sriov.CreateHostDevicesFromIfacesAndPool(vmi.Spec.Domain.Devices.Interfaces, pciPool{"sriov-net": "0000:3b:02.4"})
	require.NoError(t, err)
	require.Len(t, hostdevs, 1)
	require.Empty(t, hostdevs[0].Mode, "KubeVirt v1.9.0 builds its PCI hostdev without mode")
	spec := domainSpec()
	spec.Name = "tenant-b_vm-core-sriov"
	spec.Devices.HostDevices = hostdevs
	return spec
}

// TestPluginHazard_V190_AnyPluginCR_StopsCoreSRIOVVMIs_OursPasses is kubevirt/kubevirt#18861 on KubeVirt
// v1.9.0's own code: virt-launcher calls plugins.ApplyDomainHooks with every Plugin CR of the cluster
// (SetDomainSpecStrWithHooks), and it converts the domain with libvirtxml (translate.ToLibvirtDomain) before
// it evaluates any plugin's condition. libvirtxml refuses a hostdev without mode, which is how KubeVirt
// builds its own PCI hostdevs (core SR-IOV, hostDevices, GPUs): with our manifests/plugin applied, every such
// VMI of the cluster fails to start, whatever our Plugin's condition and failureStrategy say. Our hostdev sets
// mode and converts. manifests/plugin carries the containment (a ValidatingAdmissionPolicy that denies such
// VMIs while a Plugin exists, naming the issue; test/controlplane proves its verdicts).
func TestPluginHazard_V190_AnyPluginCR_StopsCoreSRIOVVMIs_OursPasses(t *testing.T) {
	vmi := coreSRIOVVMI()
	spec := coreSRIOVDomain(t, vmi)

	got, _, err := plugins.ApplyDomainHooks(nil, vmi, spec, pluginv1alpha1.InvocationContextBoot)
	require.NoError(t, err, "no Plugin CR: the domain passes untouched")
	assert.Same(t, spec, got)

	ours := ourPlugin(t, "sriov-udn-binding", 0)
	ignoring := ours.DeepCopy()
	ignoring.Name = "ignoring"
	ignoring.Spec.FailureStrategy = pluginv1alpha1.FailureStrategyIgnore
	for name, p := range map[string]pluginv1alpha1.Plugin{
		// Its condition selects only VMIs bound to sriov-udn: never evaluated.
		"manifests/plugin's Plugin (condition: VMIs with the sriov-udn binding)": ours,
		"the same with failureStrategy Ignore":                                   *ignoring,
		"a Plugin with no hook at all":                                           {ObjectMeta: k8smeta.ObjectMeta{Name: "none"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{p}, vmi, spec, pluginv1alpha1.InvocationContextBoot)
			require.Error(t, err, "the core SR-IOV VMI's domain is refused")
			assert.Contains(t, err.Error(), "Missing 'mode' attribute on domain hostdev")
			t.Logf("virt-launcher v1.9.0: %v", err)
		})
	}

	t.Run("our hostdev, beside the same Plugin, converts", func(t *testing.T) {
		ourVMI := vmi.DeepCopy()
		ourVMI.Spec.Domain.Devices.Interfaces[0].SRIOV = nil
		ourVMI.Spec.Domain.Devices.Interfaces[0].Binding = &v1.PluginBinding{Name: "sriov-udn"}
		plain := domainSpec()
		raw, err := xml.MarshalIndent(plain, "", "\t")
		require.NoError(t, err)
		wired, err := domain.Apply(raw, []model.BoundInterface{{Name: "sriov-net", Network: "sriov-net", HostPCIAddress: "0000:3b:02.4", DeviceType: "pci"}})
		require.NoError(t, err)
		var withOurs api.DomainSpec
		require.NoError(t, xml.Unmarshal(wired, &withOurs))
		require.Len(t, withOurs.Devices.HostDevices, 1)
		require.Equal(t, "subsystem", withOurs.Devices.HostDevices[0].Mode)
		got, _, err := plugins.ApplyDomainHooks([]pluginv1alpha1.Plugin{{ObjectMeta: k8smeta.ObjectMeta{Name: "none"}}}, ourVMI, &withOurs, pluginv1alpha1.InvocationContextBoot)
		require.NoError(t, err)
		assert.Len(t, got.Devices.HostDevices, 1)
	})
}
