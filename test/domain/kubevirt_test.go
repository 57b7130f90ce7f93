// Package domain_test drives pkg/domain with the domain KubeVirt itself builds for a VMI, through
// virt-launcher's own marshalling, and checks the result with KubeVirt's own readers.
package domain_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "kubevirt.io/api/core/v1"
	cmdv1 "kubevirt.io/kubevirt/pkg/handler-launcher-com/cmd/v1"
	"kubevirt.io/kubevirt/pkg/network/cache"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	kfs "kubevirt.io/kubevirt/pkg/os/fs"
	"kubevirt.io/kubevirt/pkg/util"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter"
	archconverter "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter/arch"
	convertertypes "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter/types"
	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

const (
	bindingName = "sriov-udn"
	udnIface    = "udn"
	udnMAC      = "02:00:00:0a:0b:0c"
	udnGuestPCI = "0000:81:01.0"
	udnHostPCI  = "0000:65:00.2"
	udnBoot     = uint(2)
	coreIface   = "core" // KubeVirt's own SR-IOV binding, wired by KubeVirt as hostdev ua-sriov-core
	vmiUID      = "8a2b6d5e-0000-4000-8000-000000000001"
)

// newVMI mixes masquerade on the pod network, bridge on a multus network, KubeVirt's core SR-IOV
// and our binding on a multus network. Every NIC has a MAC: NetStat reads the live domain, where
// libvirt has filled in one for each <interface> (netstat.go dereferences it).
func newVMI() *v1.VirtualMachineInstance {
	boot := udnBoot
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: k8smeta.ObjectMeta{Name: "vmi-udn", Namespace: "default", UID: types.UID(vmiUID)},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Devices: v1.Devices{
					Disks: []v1.Disk{{Name: "cloudinit", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}},
					Interfaces: []v1.Interface{
						{Name: "default", MacAddress: "02:00:00:00:00:01", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
						{Name: "br", MacAddress: "02:00:00:00:00:02", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
						{Name: coreIface, MacAddress: "02:00:00:00:00:03", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}},
						{Name: udnIface, MacAddress: udnMAC, PciAddress: udnGuestPCI, BootOrder: &boot, Binding: &v1.PluginBinding{Name: bindingName}},
					},
				},
			},
			Networks: []v1.Network{
				*v1.DefaultPodNetwork(),
				{Name: "br", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "default/br-nad"}}},
				{Name: coreIface, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "default/sriov-nad"}}},
				{Name: udnIface, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "default/udn-nad"}}},
			},
			Volumes: []v1.Volume{{
				Name:         "cloudinit",
				VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}},
			}},
		},
	}
	v1.SetObjectDefaults_VirtualMachineInstance(vmi)
	return vmi
}

// convert builds the domain spec the way virt-launcher does (virtwrap/manager.go, SyncVMI:
// converter, then the api defaulter). attachment is virt-handler's domain attachment per interface;
// KubeVirt's core SR-IOV hostdev is built as KubeVirt builds it
// (virtwrap/device/hostdevice/hostdev.go, createPCIHostDevice).
func convert(t testing.TB, vmi *v1.VirtualMachineInstance, attachment map[string]string) *api.DomainSpec {
	t.Helper()
	coreAddr := &api.Address{Type: "pci", Domain: "0x0000", Bus: "0x3b", Slot: "0x02", Function: "0x4"}
	c := &convertertypes.ConverterContext{
		Architecture:                    archconverter.NewConverter(runtime.GOARCH),
		VirtualMachine:                  vmi,
		AllowEmulation:                  true,
		SMBios:                          &cmdv1.SMBios{},
		DomainAttachmentByInterfaceName: attachment,
		SRIOVDevices: []api.HostDevice{{
			Alias:   api.NewUserDefinedAlias("sriov-" + coreIface),
			Source:  api.HostDeviceSource{Address: coreAddr},
			Type:    api.HostDevicePCI,
			Managed: "no",
		}},
	}
	dom := &api.Domain{}
	require.NoError(t, converter.Convert_v1_VirtualMachineInstance_To_api_Domain(vmi, dom, c))
	api.NewDefaulter(c.Architecture.GetArchitecture()).SetObjectDefaults_Domain(dom)
	return &dom.Spec
}

func tapAttachment() map[string]string {
	return map[string]string{"default": string(v1.Tap), "br": string(v1.Tap)}
}

// marshalLikeHookManager is what virt-launcher sends to OnDefineDomain (pkg/hooks/manager.go).
func marshalLikeHookManager(t testing.TB, spec *api.DomainSpec) []byte {
	t.Helper()
	out, err := xml.MarshalIndent(spec, "", "\t")
	require.NoError(t, err)
	return out
}

// unmarshalLikeVirtLauncher is how virt-launcher reads a hook's result back into the spec it defines
// and passes to the next OnDefineDomain (virtwrap/util/libvirt_helper.go, SetDomainSpecStrWithHooks).
func unmarshalLikeVirtLauncher(t testing.TB, domainXML []byte) *api.DomainSpec {
	t.Helper()
	spec := &api.DomainSpec{}
	require.NoError(t, xml.Unmarshal(domainXML, spec))
	return spec
}

func boundUDN() []model.BoundInterface {
	boot := udnBoot
	return []model.BoundInterface{{
		Name: udnIface, Network: udnIface, NetworkName: "default/udn-nad",
		HostPCIAddress: udnHostPCI, DeviceType: "pci", GuestPCIAddress: udnGuestPCI, BootOrder: &boot,
	}}
}

func hostdevsByAlias(spec *api.DomainSpec, name string) []api.HostDevice {
	var found []api.HostDevice
	for _, hd := range spec.Devices.HostDevices {
		if hd.Alias != nil && hd.Alias.GetName() == name {
			found = append(found, hd)
		}
	}
	return found
}

func withoutHostdev(spec *api.DomainSpec, name string) *api.DomainSpec {
	out := spec.DeepCopy()
	out.Devices.HostDevices = nil
	for _, hd := range spec.Devices.HostDevices {
		if hd.Alias == nil || hd.Alias.GetName() != name {
			out.Devices.HostDevices = append(out.Devices.HostDevices, hd)
		}
	}
	return out
}

func TestApply_KubeVirtConvertedDomain_CalledThreeTimesThroughVirtLauncher_StableAndComplete(t *testing.T) {
	kubevirtSpec := convert(t, newVMI(), tapAttachment())
	require.Len(t, kubevirtSpec.Devices.Interfaces, 2, "masquerade and bridge are <interface>s")
	require.Len(t, hostdevsByAlias(kubevirtSpec, "sriov-"+coreIface), 1, "core SR-IOV is KubeVirt's hostdev")
	require.Empty(t, hostdevsByAlias(kubevirtSpec, "sriov-"+udnIface), "KubeVirt does not wire our VF")

	// virt-launcher calls OnDefineDomain up to three times per start (virtwrap/manager.go,
	// allocateHotplugPorts), each time with the spec the previous call produced.
	spec := kubevirtSpec
	var outputs [][]byte
	var specs []*api.DomainSpec
	for call := 1; call <= 3; call++ {
		out, err := domain.Apply(marshalLikeHookManager(t, spec), boundUDN())
		require.NoError(t, err, "call %d", call)
		outputs = append(outputs, out)
		spec = unmarshalLikeVirtLauncher(t, out)
		specs = append(specs, spec)
	}

	// virt-launcher's own re-read drops the root's xmlns:qemu (api.DomainSpec.XmlNS is tagged
	// `xml:"xmlns:qemu,attr"`, which encoding/xml never fills on Unmarshal), so call 2's input differs
	// from call 1's whatever the sidecars do; from then on the bytes are stable.
	assert.Equal(t, string(outputs[1]), string(outputs[2]), "call 3 output differs from call 2")
	again, err := domain.Apply(outputs[0], boundUDN())
	require.NoError(t, err)
	assert.Equal(t, string(outputs[0]), string(again), "our own output fed straight back changed")
	assert.Equal(t, specs[0], specs[1])
	assert.Equal(t, specs[0], specs[2])

	ours := hostdevsByAlias(specs[2], "sriov-"+udnIface)
	require.Len(t, ours, 1)
	hd := ours[0]
	assert.True(t, hd.Alias.IsUserDefined())
	assert.Equal(t, "pci", hd.Type)
	assert.Equal(t, "subsystem", hd.Mode)
	assert.Equal(t, "no", hd.Managed)
	require.NotNil(t, hd.Source.Address)
	assert.Equal(t, api.Address{Domain: "0x0000", Bus: "0x65", Slot: "0x00", Function: "0x2"}, *hd.Source.Address)
	require.NotNil(t, hd.Address)
	assert.Equal(t, api.Address{Type: "pci", Domain: "0x0000", Bus: "0x81", Slot: "0x01", Function: "0x0"}, *hd.Address)
	require.NotNil(t, hd.BootOrder)
	assert.Equal(t, udnBoot, hd.BootOrder.Order)

	// Everything KubeVirt built is still there with the same meaning: only our hostdev was added.
	// (Compared with KubeVirt's own marshal/unmarshal of its spec, i.e. virt-launcher without sidecars.)
	kubevirtRoundTrip := unmarshalLikeVirtLauncher(t, marshalLikeHookManager(t, kubevirtSpec))
	for call, spec := range specs {
		assert.Equal(t, kubevirtRoundTrip, withoutHostdev(spec, "sriov-"+udnIface), "call %d", call+1)
	}
}

func TestApply_ReadBackWithLibvirtAssignedAddress_ThroughVirtLauncher_SentBackUnchanged(t *testing.T) {
	// KubeVirt main (#17605, virtwrap/manager.go allocateHotplugPorts) reads the defined domain back from
	// libvirt and sends it through OnDefineDomain again: our hostdev then carries the guest address libvirt
	// assigned (test/libvirt does this with libvirt 11.3 itself). Without a VMI pciAddress, ours keeps it.
	bound := boundUDN()
	bound[0].GuestPCIAddress = ""
	first, err := domain.Apply(marshalLikeHookManager(t, convert(t, newVMI(), tapAttachment())), bound)
	require.NoError(t, err)
	readBack := unmarshalLikeVirtLauncher(t, first)
	for i := range readBack.Devices.HostDevices {
		hd := &readBack.Devices.HostDevices[i]
		require.Nil(t, hd.Address, "no guest address before libvirt")
		hd.Address = &api.Address{Type: "pci", Domain: "0x0000", Bus: fmt.Sprintf("0x%02x", 5+i), Slot: "0x00", Function: "0x0"}
	}
	sent := marshalLikeHookManager(t, readBack)

	out, err := domain.Apply(sent, bound)
	require.NoError(t, err)
	assert.Equal(t, string(sent), string(out), "nothing of the read-back changes")
	ours := hostdevsByAlias(unmarshalLikeVirtLauncher(t, out), "sriov-"+udnIface)
	require.Len(t, ours, 1)
	assert.Equal(t, hostdevsByAlias(readBack, "sriov-"+udnIface)[0].Address, ours[0].Address)
}

func TestApply_KubeVirtConvertedDomain_OnlyOurHostdevIsAddedToTheBytes(t *testing.T) {
	src := string(marshalLikeHookManager(t, convert(t, newVMI(), tapAttachment())))

	out, err := domain.Apply([]byte(src), boundUDN())
	require.NoError(t, err)

	i := strings.Index(src, "\n\t</devices>")
	require.GreaterOrEqual(t, i, 0)
	got := string(out)
	require.True(t, strings.HasPrefix(got, src[:i]), "bytes before the insertion point changed")
	require.True(t, strings.HasSuffix(got, src[i:]), "bytes after the insertion point changed")
	inserted := got[i : len(got)-len(src[i:])]
	assert.Equal(t, 1, strings.Count(inserted, "<hostdev "))
	assert.True(t, strings.HasPrefix(inserted, "\n\t\t<hostdev "), "indented like KubeVirt's devices: %q", inserted)
	assert.True(t, strings.HasSuffix(inserted, "</hostdev>"))
}

func TestApply_BindingRegisteredAsTap_KubeVirtWiresTheNIC_DomainUntouched(t *testing.T) {
	attachment := tapAttachment()
	attachment[udnIface] = string(v1.Tap) // CR: domainAttachmentType: tap
	src := marshalLikeHookManager(t, convert(t, newVMI(), attachment))

	doc, err := domain.Parse(context.Background(), src)
	require.NoError(t, err)
	wired, err := doc.WiredByKubeVirt(udnIface)
	require.NoError(t, err)
	require.True(t, wired)

	// Device-info is irrelevant for such a NIC: even none is fine.
	bound := boundUDN()
	bound[0].HostPCIAddress, bound[0].DeviceType = "", ""
	out, err := domain.Apply(src, bound)
	require.NoError(t, err)
	assert.Equal(t, string(src), string(out))
}

// cacheCreator roots KubeVirt's pod interface cache in a temp dir.
type cacheCreator struct{ root string }

func (c cacheCreator) New(path string) *cache.Cache {
	return cache.NewCustomCache(filepath.Join(c.root, path), kfs.New())
}

func TestNetStat_ReportsBoundInterfaceFromOurHostdev_WithNameAndMAC(t *testing.T) {
	// NetStat names a hostdev's status after its alias minus "sriov-" and takes the MAC from the
	// VMI interface spec, never from the domain (netstat.go:310-319,
	// sriovIfacesStatusFromDomainHostDevices): a VMI without macAddress gets an empty MAC.
	tests := []struct {
		name, vmiMAC, wantMAC string
	}{
		{name: "VMI sets macAddress", vmiMAC: udnMAC, wantMAC: udnMAC},
		{name: "VMI leaves macAddress unset", vmiMAC: "", wantMAC: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi := newVMI()
			vmi.Spec.Domain.Devices.Interfaces[3].MacAddress = tt.vmiMAC
			require.Equal(t, udnIface, vmi.Spec.Domain.Devices.Interfaces[3].Name)
			kubevirtSpec := convert(t, vmi, tapAttachment())
			out, err := domain.Apply(marshalLikeHookManager(t, kubevirtSpec), boundUDN())
			require.NoError(t, err)
			wired := unmarshalLikeVirtLauncher(t, out)

			// The pod interface cache as virt-handler keeps it (network/cache/podinterface.go).
			// Written directly: KubeVirt's writer also chowns the file to the qemu user, absent here.
			creator := cacheCreator{root: t.TempDir()}
			entry, err := json.Marshal(cache.PodIfaceCacheData{PodIP: "10.128.0.5", PodIPs: []string{"10.128.0.5", "fd00::5"}})
			require.NoError(t, err)
			entryDir := filepath.Join(creator.root, util.VirtPrivateDir, "network-info-cache", vmiUID)
			require.NoError(t, os.MkdirAll(entryDir, 0o750))
			require.NoError(t, os.WriteFile(filepath.Join(entryDir, udnIface), entry, 0o600))

			statusOf := func(spec *api.DomainSpec) map[string]v1.VirtualMachineInstanceNetworkInterface {
				v := vmi.DeepCopy()
				require.NoError(t, netsetup.NewNetStateWithCustomFactory(creator).UpdateStatus(v, &api.Domain{Spec: *spec}))
				byName := map[string]v1.VirtualMachineInstanceNetworkInterface{}
				for _, s := range v.Status.Interfaces {
					byName[s.Name] = s
				}
				return byName
			}

			require.NotContains(t, statusOf(kubevirtSpec), udnIface, "without our hostdev KubeVirt reports nothing for the NIC")

			got := statusOf(wired)
			require.Contains(t, got, udnIface)
			udn := got[udnIface]
			assert.Equal(t, udnIface, udn.Name)
			assert.Equal(t, tt.wantMAC, udn.MAC)
			assert.Equal(t, "domain", udn.InfoSource)
			// Once the status entry exists, NetStat fills its IPs from the pod interface cache.
			assert.Equal(t, []string{"10.128.0.5", "fd00::5"}, udn.IPs)

			for _, name := range []string{"default", "br", coreIface} {
				assert.Contains(t, got, name, "other interfaces still reported")
			}
		})
	}
}

// kubevirtHooksTestDomain is the domain KubeVirt's own hook manager tests send to sidecars
// (pkg/hooks/testdata/domain.xml): two-space indent, qemu namespace, metadata, block disks.
func kubevirtHooksTestDomain(t *testing.T) string {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "kubevirt.io/kubevirt").Output()
	require.NoError(t, err, "locate kubevirt.io/kubevirt in the module cache")
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "pkg", "hooks", "testdata", "domain.xml"))
	require.NoError(t, err)
	return string(raw)
}

func TestApply_KubeVirtHooksTestDomain_KeepsEveryOtherByte(t *testing.T) {
	src := kubevirtHooksTestDomain(t)
	require.Contains(t, src, `name="pvc_block_test"`)

	out, err := domain.Apply([]byte(src), boundUDN())
	require.NoError(t, err)
	again, err := domain.Apply(out, boundUDN())
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again))

	const anchor = "\n  </devices>"
	i := strings.Index(src, anchor)
	require.GreaterOrEqual(t, i, 0)
	got := string(out)
	require.True(t, strings.HasPrefix(got, src[:i]))
	require.True(t, strings.HasSuffix(got, src[i:]))
	inserted := got[i : len(got)-len(src[i:])]
	assert.True(t, strings.HasPrefix(inserted, "\n    <hostdev "), "indented like the file's devices: %q", inserted)

	spec := unmarshalLikeVirtLauncher(t, out)
	require.Len(t, hostdevsByAlias(spec, "sriov-"+udnIface), 1)
}

// TestLibvirtxmlDomainRoundTrip_LosesKubeVirtData records why Apply splices bytes instead of
// round-tripping libvirtxml.Domain: that loses what KubeVirt emitted. If libvirtxml ever keeps it,
// this test fails and the splice could be reconsidered.
func TestLibvirtxmlDomainRoundTrip_LosesKubeVirtData(t *testing.T) {
	src := kubevirtHooksTestDomain(t)
	var dom libvirtxml.Domain
	require.NoError(t, dom.Unmarshal(src))
	again, err := dom.Marshal()
	require.NoError(t, err)
	assert.NotContains(t, again, `name="pvc_block_test"`, "block disk <source name=> dropped")

	// KubeVirt's own SR-IOV hostdev has no mode attribute; libvirtxml refuses to parse it.
	kubevirtSRIOV := string(marshalLikeHookManager(t, convert(t, newVMI(), tapAttachment())))
	require.Contains(t, kubevirtSRIOV, `<alias name="ua-sriov-core">`)
	assert.Error(t, (&libvirtxml.Domain{}).Unmarshal(kubevirtSRIOV))
}

// BenchmarkApply_KubeVirtConvertedDomain times a second-or-later OnDefineDomain on the domain
// KubeVirt builds for the mixed VMI, against the 2 ms hook budget (DESIGN.md section 5).
func BenchmarkApply_KubeVirtConvertedDomain(b *testing.B) {
	spec := convert(b, newVMI(), tapAttachment())
	first, err := domain.Apply(marshalLikeHookManager(b, spec), boundUDN())
	if err != nil {
		b.Fatal(err)
	}
	src := marshalLikeHookManager(b, unmarshalLikeVirtLauncher(b, first))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := domain.Apply(src, boundUDN()); err != nil {
			b.Fatal(err)
		}
	}
}
