package guest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// Names shared by the fixtures.
const (
	namespace   = "guest-ns"
	bindingName = "sriov-udn" // the binding name in the KubeVirt CR, the sidecar's default
)

// vmiIface is one VMI interface and its network.
type vmiIface struct {
	Name string
	MAC  string
	// NAD is "<ns>/<nad>" of a Multus network bound to our plugin; "" means the pod network
	// with masquerade (or bridge, with Bridge), which is not ours.
	NAD    string
	Bridge bool
}

// Bound says whether the interface uses our binding.
func (i vmiIface) Bound() bool { return i.NAD != "" }

// hashedPodIface is KubeVirt's pod interface name for a secondary network
// (pkg/network/namescheme GenerateHashedInterfaceName): "pod" + 11 hex of sha256(network name).
func hashedPodIface(network string) string {
	sum := sha256.Sum256([]byte(network))
	return "pod" + hex.EncodeToString(sum[:])[:11]
}

// cloudInitVolume says which cloud-init volume the VMI has.
type cloudInitVolume struct {
	ConfigDrive bool
	UserData    string
	NetworkData string
}

// newVMI builds the VMI a user would create: interfaces with MACs, Multus networks for our
// binding, and one cloud-init volume.
func newVMI(name string, ifaces []vmiIface, ci cloudInitVolume) *kvv1.VirtualMachineInstance {
	vmi := &kvv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(uuidFor("vmi/" + name))},
	}
	vmi.Spec.Domain.Firmware = &kvv1.Firmware{UUID: types.UID(uuidFor("firmware/" + name))}
	for _, i := range ifaces {
		iface := kvv1.Interface{Name: i.Name, MacAddress: i.MAC}
		network := kvv1.Network{Name: i.Name}
		if i.Bound() {
			iface.Binding = &kvv1.PluginBinding{Name: bindingName}
			network.Multus = &kvv1.MultusNetwork{NetworkName: i.NAD}
		} else {
			if i.Bridge {
				iface.Bridge = &kvv1.InterfaceBridge{}
			} else {
				iface.Masquerade = &kvv1.InterfaceMasquerade{}
			}
			network.Pod = &kvv1.PodNetwork{}
		}
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, iface)
		vmi.Spec.Networks = append(vmi.Spec.Networks, network)
	}
	vol := kvv1.Volume{Name: "cloudinitdisk"}
	if ci.ConfigDrive {
		vol.CloudInitConfigDrive = &kvv1.CloudInitConfigDriveSource{UserData: ci.UserData, NetworkData: ci.NetworkData}
	} else {
		vol.CloudInitNoCloud = &kvv1.CloudInitNoCloudSource{UserData: ci.UserData, NetworkData: ci.NetworkData}
	}
	vmi.Spec.Volumes = []kvv1.Volume{vol}
	vmi.Spec.Domain.Devices.Disks = []kvv1.Disk{{Name: "cloudinitdisk", DiskDevice: kvv1.DiskDevice{Disk: &kvv1.DiskTarget{Bus: kvv1.DiskBusVirtio}}}}
	return vmi
}

// uuidFor is a stable, RFC 4122-shaped id derived from s.
func uuidFor(s string) string {
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:16])
	return fmt.Sprintf("%s-%s-4%s-8%s-%s", h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])
}

// guestNICs returns one MAC per VMI interface, in spec order: what the guest gets. An interface the
// domain wires (<interface>: the pod NIC) gets the domain's MAC, or one made up anew, as libvirt does
// at define time when the domain has none; a VF gets its own MAC (the VMI's).
func guestNICs(vmi *kvv1.VirtualMachineInstance, domainMACs map[string]string) ([]net.HardwareAddr, error) {
	var macs []net.HardwareAddr
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		text := i.MacAddress
		if d, wired := domainMACs[i.Name]; wired {
			text = d
			if text == "" {
				macs = append(macs, libvirtMadeUpMAC())
				continue
			}
		}
		mac, err := net.ParseMAC(text)
		if err != nil {
			return nil, fmt.Errorf("VMI %s interface %s: %w", vmi.Name, i.Name, err)
		}
		macs = append(macs, mac)
	}
	return macs, nil
}

// libvirtMadeUpMAC is what libvirt gives an interface without a MAC: 52:54:00 (qemu's prefix) and
// three random bytes (virDomainNetGenerateMAC).
func libvirtMadeUpMAC() net.HardwareAddr {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 0}
	_, _ = rand.Read(mac[3:])
	return mac
}

// attachment is what OVN-K and Multus report for one bound VMI interface.
type attachment struct {
	Iface vmiIface
	Net   ovn.PodNetwork
	PCI   string // the VF's host PCI address (network-status and network-info device-info)
	// StatusIPs is network-status "ips" (bare addresses, no prefix); StatusGateway its "gateway"
	// (default routes only); StatusDefault its "default".
	StatusIPs     []string
	StatusGateway []string
	StatusDefault bool
	// StatusDNS and StatusMTU are network-status "dns" and "mtu" (zero: absent).
	StatusDNS nadv1.DNS
	StatusMTU int
}

// clusterDefault is the pod's cluster default network entry (eth0), infrastructure-locked when a
// primary UDN exists, else primary.
func clusterDefault(role, mac string) (ovn.PodNetwork, nadv1.NetworkStatus) {
	pn := ovn.PodNetwork{
		IPAddresses: []string{"10.244.1.7/24", "fd00:10:244:1::7/64"},
		MACAddress:  mac,
		Routes: []ovn.PodRoute{
			{Dest: "10.244.0.0/16", NextHop: "10.244.1.1"},
			{Dest: "100.64.0.0/16", NextHop: "10.244.1.1"},
		},
		Role: role,
	}
	st := nadv1.NetworkStatus{
		Name: "ovn-kubernetes", Interface: "eth0", IPs: []string{"10.244.1.7", "fd00:10:244:1::7"},
		Mac: mac, Default: role == "primary", DNS: nadv1.DNS{},
	}
	if role == "primary" {
		pn.GatewayIPs = []string{"10.244.1.1", "fd00:10:244:1::1"}
		st.Gateway = []string{"10.244.1.1", "fd00:10:244:1::1"}
	}
	return pn, st
}

// podAnnotations returns the virt-launcher pod's annotations for the bound attachments, as
// OVN-Kubernetes (pod-networks), Multus (networks, network-status) and virt-controller
// (kubevirt.io/network-info) write them. defaultRole is the cluster default network's role.
func podAnnotations(vmi *kvv1.VirtualMachineInstance, defaultRole string, atts []attachment) (map[string]string, error) {
	return podAnnotationsWithPodMAC(vmi, defaultRole, defaultPodIfaceMAC, atts)
}

// defaultPodIfaceMAC is the MAC of the pod's eth0 (OVN-K derives it from the pod's IPv4: 0a:58 + IP).
const defaultPodIfaceMAC = "0a:58:0a:f4:01:07"

// podAnnotationsWithPodMAC is podAnnotations for a pod whose eth0 has MAC podMAC (a new pod of the same
// VM gets a new one).
func podAnnotationsWithPodMAC(vmi *kvv1.VirtualMachineInstance, defaultRole, podMAC string, atts []attachment) (map[string]string, error) {
	defPN, defStatus := clusterDefault(defaultRole, podMAC)
	podNetworks := ovn.PodNetworks{"default": defPN}
	statuses := []nadv1.NetworkStatus{defStatus}
	type selection struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		MAC       string `json:"mac,omitempty"`
		Interface string `json:"interface"`
	}
	var selections []selection
	type networkInfoIface struct {
		Network    string            `json:"network"`
		DeviceInfo *nadv1.DeviceInfo `json:"deviceInfo,omitempty"`
		Mac        string            `json:"mac,omitempty"`
	}
	var networkInfo struct {
		Interfaces []networkInfoIface `json:"interfaces"`
	}

	for _, a := range atts {
		podIface := hashedPodIface(a.Iface.Name)
		ns, nad, ok := strings.Cut(a.Iface.NAD, "/")
		if !ok || ns == "" || nad == "" {
			return nil, fmt.Errorf("attachment %s: NAD %q is not <ns>/<name>", a.Iface.Name, a.Iface.NAD)
		}
		podNetworks[a.Iface.NAD] = a.Net
		deviceInfo := &nadv1.DeviceInfo{Type: nadv1.DeviceInfoTypePCI, Version: "1.1.0", Pci: &nadv1.PciDevice{PciAddress: a.PCI}}
		statuses = append(statuses, nadv1.NetworkStatus{
			Name: a.Iface.NAD, Interface: podIface, IPs: a.StatusIPs, Mac: a.Iface.MAC,
			Default: a.StatusDefault, Gateway: a.StatusGateway, DeviceInfo: deviceInfo, DNS: a.StatusDNS, Mtu: a.StatusMTU,
		})
		selections = append(selections, selection{Name: nad, Namespace: ns, MAC: a.Iface.MAC, Interface: podIface})
		networkInfo.Interfaces = append(networkInfo.Interfaces, networkInfoIface{Network: a.Iface.Name, DeviceInfo: deviceInfo, Mac: a.Iface.MAC})
	}

	ann := map[string]string{
		"kubectl.kubernetes.io/default-container": "compute",
		"kubevirt.io/domain":                      vmi.Name,
	}
	for key, v := range map[string]any{
		ovn.PodNetworksAnnotation:    podNetworks,
		nadv1.NetworkStatusAnnot:     statuses,
		nadv1.NetworkAttachmentAnnot: selections,
		"kubevirt.io/network-info":   networkInfo,
	} {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal annotation %s: %w", key, err)
		}
		ann[key] = string(data)
	}
	return ann, nil
}

// podLabels are the virt-launcher pod's labels (pkg/virt-controller/services/template.go).
func podLabels(vmi *kvv1.VirtualMachineInstance) map[string]string {
	return map[string]string{
		"kubevirt.io":            "virt-launcher",
		"kubevirt.io/created-by": string(vmi.UID),
		"vm.kubevirt.io/name":    vmi.Name,
	}
}
