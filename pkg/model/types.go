package model

import (
	"net/netip"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Family is an IP address family.
type Family int

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// Route is a guest route. Dest is never a default route (0.0.0.0/0, ::/0): default routes are
// carried as Gateways, because cloud-init 22.4.2 mis-renders v2 "to: default" and "::/0".
type Route struct {
	Dest    netip.Prefix
	NextHop netip.Addr
}

// DNS is the resolver configuration for one interface (from Multus network-status "dns").
type DNS struct {
	Nameservers []netip.Addr
	Search      []string
	Domain      string
}

// MACSource says where a BoundInterface's MAC came from.
type MACSource string

const (
	MACFromVMI           MACSource = "vmi"            // spec.domain.devices.interfaces[].macAddress
	MACFromNetworkStatus MACSource = "network-status" // Multus k8s.v1.cni.cncf.io/network-status "mac"
	MACFromPodNetworks   MACSource = "pod-networks"   // OVN-K k8s.ovn.org/pod-networks "mac_address"
	MACFromNetworkInfo   MACSource = "network-info"   // kubevirt.io/network-info "mac"
)

// BoundInterface is everything the sidecar knows about one VMI interface bound to our binding:
// what cloud-init, the domain wiring and the interface cache need. Built by model.Build from
// the VMI and a downwardapi.Snapshot; consumers treat it as read-only.
type BoundInterface struct {
	Name        string // VMI interface name (spec.domain.devices.interfaces[].name)
	Network     string // VMI network name (spec.networks[].name)
	NetworkName string // the fully qualified "<ns>/<nad>" of multus.networkName
	// PodInterfaceName is KubeVirt's hashed pod interface name: "pod" + 11 hex of sha256(Network)
	// ("eth0" for a multus default network, "net<N>" on pods with legacy ordinal names).
	PodInterfaceName string

	MAC       netval.MAC // zero when no source has one
	MACSource MACSource

	// Addresses carry the host address and prefix, primary family first.
	Addresses []netip.Prefix
	// PrefixKnown is false when the addresses came from network-status alone (no prefix there);
	// their prefixes are then GuessPrefix's. IPv6 link-local addresses are never listed.
	PrefixKnown bool
	// Gateways are default-route next hops, at most one per family, primary family first. Only
	// set for role primary or an explicit gateway (network-status "gateway", a pod-networks route
	// to 0.0.0.0/0 or ::/0). Link-local next hops are left out (not portable in cloud-init).
	Gateways []netip.Addr
	Routes   []Route
	DNS      DNS
	MTU      int // 0 = unknown
	// DHCP is true when pod-networks says ipam_mode "dhcp" (OKEP-6224, IPv4 only): the guest runs DHCPv4
	// on this NIC and configures any IPv6 address statically. Addresses still holds what pod-networks lists
	// (the lease ovnkube-node discovered at CNI ADD), for the interface cache.
	DHCP bool
	Role string // pod-networks role, "" when unknown

	HostPCIAddress string // the VF's host PCI address from device-info ("0000:65:00.2"); "" if unknown
	DeviceType     string // the device-info "type" ("pci", "vdpa", ...); "" when unknown
	// GuestPCIAddress and BootOrder come from the VMI interface spec ("" / nil when unset).
	GuestPCIAddress string
	BootOrder       *uint

	// Virtio is true for the pod-network NIC FindPodNIC returns, not a VF: its guest name must not read as one.
	Virtio bool
}
