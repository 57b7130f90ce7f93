package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"

	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "kubevirt.io/api/core/v1"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// Fixture names shared by the benchmark's VMIs and annotations.
const (
	BindingName   = "sriov-udn"
	Namespace     = "ns1"
	BaseNAD       = "l2net"
	PasstBinding  = "passt"
	VMIName       = "vm1"
	VMIUID        = "3f1f5a0e-0000-4000-8000-0000000000b1"
	PodNICMAC     = "02:00:00:00:00:aa"
	podIfaceCount = 11 // hex digits KubeVirt keeps of sha256(network name) (namescheme.HashedPodInterfaceName)
)

// Iface is one interface bound to our binding: VMI network name, Multus NAD ("ns/name"), MAC,
// the VF's host PCI address and the addresses OVN-K reports.
type Iface struct {
	Network string
	NAD     string
	MAC     string
	HostPCI string
	IPv4    string // CIDR
	IPv6    string // CIDR
}

// HashedPodIfaceName is KubeVirt's pod interface name for a network: "pod" + 11 hex digits of
// sha256(network name) (pkg/network/namescheme). Computed here, not taken from pkg/model, so the
// fixture does not depend on the code it measures.
func HashedPodIfaceName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return "pod" + hex.EncodeToString(sum[:])[:podIfaceCount]
}

// Ifaces returns n distinct bound interfaces, the i-th on NAD ns1/<nadPrefix>[-i] (index 0 is the
// bare name, as the single-interface fixture ns1/l2net).
func Ifaces(n int, nadPrefix string) []Iface {
	out := make([]Iface, n)
	for i := range out {
		nad := nadPrefix
		if i > 0 {
			nad = fmt.Sprintf("%s-%d", nadPrefix, i)
		}
		out[i] = Iface{
			Network: fmt.Sprintf("udn%d", i),
			NAD:     Namespace + "/" + nad,
			MAC:     fmt.Sprintf("02:00:00:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff),
			HostPCI: fmt.Sprintf("0000:%02x:%02x.%d", 0x65+(i/256)%16, (i/8)%32, i%8),
			IPv4:    fmt.Sprintf("10.%d.%d.5/24", 100+(i/256)%100, i%256),
			IPv6:    fmt.Sprintf("fd00:%x::5/64", 0x100+i),
		}
	}
	return out
}

// VMI builds a VMI with a passt-bound pod network (so the peer has work in OnDefineDomain), the given
// interfaces bound to our binding with MACs set, and a cloudInitNoCloud volume.
func VMI(ifaces []Iface) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: k8smeta.ObjectMeta{Name: VMIName, Namespace: Namespace, UID: types.UID(VMIUID)},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
				// The pod NIC needs a MAC: without user networkData, the sidecar adds it to the network
				// config with DHCP matched by MAC (cloud-init's own fallback is replaced).
				{Name: "default", MacAddress: PodNICMAC, Binding: &v1.PluginBinding{Name: PasstBinding}},
			}}},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Volumes: []v1.Volume{{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{
				CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\npassword: bench\n"},
			}}},
		},
		Status: v1.VirtualMachineInstanceStatus{Interfaces: []v1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", PodInterfaceName: "eth0"},
		}},
	}
	for _, f := range ifaces {
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces,
			v1.Interface{Name: f.Network, MacAddress: f.MAC, Binding: &v1.PluginBinding{Name: BindingName}})
		vmi.Spec.Networks = append(vmi.Spec.Networks,
			v1.Network{Name: f.Network, NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: f.NAD}}})
	}
	return vmi
}

// CloudInitData is what virt-launcher's ReadCloudInitVolumeDataSource makes of the VMI's NoCloud volume.
func CloudInitData(vmi *v1.VirtualMachineInstance) (*cloudinit.CloudInitData, error) {
	d, err := cloudinit.ReadCloudInitVolumeDataSource(vmi, "")
	if err != nil {
		return nil, fmt.Errorf("cloud-init data of VMI %s: %w", vmi.Name, err)
	}
	if d == nil {
		return nil, fmt.Errorf("cloud-init data of VMI %s: no cloud-init volume", vmi.Name)
	}
	return d, nil
}

// DomainXML is a minimal domain as virt-launcher passes it to OnDefineDomain.
func DomainXML() ([]byte, error) {
	spec := &api.DomainSpec{
		Type: "kvm",
		Name: Namespace + "_" + VMIName,
		Devices: api.Devices{
			Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: PodNICMAC}}},
		},
	}
	out, err := xml.MarshalIndent(spec, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("marshal domain spec: %w", err)
	}
	return out, nil
}

// networkStatus mirrors one Multus network-status entry (only the fields the fixture sets).
type networkStatus struct {
	Name       string      `json:"name"`
	Interface  string      `json:"interface"`
	IPs        []string    `json:"ips,omitempty"`
	MAC        string      `json:"mac,omitempty"`
	Default    bool        `json:"default,omitempty"`
	DeviceInfo *deviceInfo `json:"device-info,omitempty"`
}

type deviceInfo struct {
	Type    string   `json:"type"`
	Version string   `json:"version"`
	PCI     *pciInfo `json:"pci,omitempty"`
}

type pciInfo struct {
	PCIAddress string `json:"pci-address"`
}

// Annotations are the pod annotations OVN-K, Multus and KubeVirt set for ifaces, plus a filler
// annotation that pads the total to at least padTo bytes (0 = no filler): real pods carry large
// unrelated annotations, and the sidecar reads them all.
func Annotations(ifaces []Iface, padTo int) (map[string]string, error) {
	statuses := []networkStatus{{Name: "ovn-kubernetes", Interface: "eth0", IPs: []string{"10.244.0.3"}, MAC: "0a:58:0a:f4:00:03", Default: true}}
	pn := ovn.PodNetworks{"default": {IPAddresses: []string{"10.244.0.3/24"}, MACAddress: "0a:58:0a:f4:00:03", GatewayIPs: []string{"10.244.0.1"}, Role: "infrastructure-locked"}}
	type netInfoIface struct {
		Network    string      `json:"network"`
		DeviceInfo *deviceInfo `json:"deviceInfo,omitempty"`
		MAC        string      `json:"mac,omitempty"`
	}
	var netInfo struct {
		Interfaces []netInfoIface `json:"interfaces"`
	}
	for _, f := range ifaces {
		di := &deviceInfo{Type: "pci", Version: "1.1.0", PCI: &pciInfo{PCIAddress: f.HostPCI}}
		statuses = append(statuses, networkStatus{
			Name: f.NAD, Interface: HashedPodIfaceName(f.Network), IPs: []string{addrOf(f.IPv4), addrOf(f.IPv6)},
			MAC: f.MAC, DeviceInfo: di,
		})
		pn[f.NAD] = ovn.PodNetwork{IPAddresses: []string{f.IPv4, f.IPv6}, MACAddress: f.MAC, Role: "secondary"}
		netInfo.Interfaces = append(netInfo.Interfaces, netInfoIface{Network: f.Network, DeviceInfo: di, MAC: f.MAC})
	}
	ann := map[string]string{}
	for key, v := range map[string]any{
		"k8s.v1.cni.cncf.io/network-status": statuses,
		ovn.PodNetworksAnnotation:           pn,
		"kubevirt.io/network-info":          netInfo,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal annotation %s: %w", key, err)
		}
		ann[key] = string(b)
	}
	size := 0
	for k, v := range ann {
		size += len(k) + len(v)
	}
	const filler = "bench.example/filler"
	if padTo > size+len(filler) {
		ann[filler] = strings.Repeat("x", padTo-size-len(filler))
	}
	return ann, nil
}

// NetworkInfoJSON is the device-info file content (raw kubevirt.io/network-info) for ifaces.
func NetworkInfoJSON(ifaces []Iface) (string, error) {
	ann, err := Annotations(ifaces, 0)
	if err != nil {
		return "", err
	}
	return ann["kubevirt.io/network-info"], nil
}

func addrOf(cidr string) string {
	if i := strings.IndexByte(cidr, '/'); i >= 0 {
		return cidr[:i]
	}
	return cidr
}
