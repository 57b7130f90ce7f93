package model

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// PodNIC is the VMI's pod-network interface when it is not ours: the NIC cloud-init's DHCP fallback would
// have configured. Any network-config the sidecar writes replaces that fallback (cloud-init renders the
// fallback only when the datasource has no network config: stages.py _find_networking_config), so the
// writer must configure this NIC too, by DHCPv4 as the fallback does, matched by MAC.
type PodNIC struct {
	Interface BoundInterface // the NIC as a DHCP BoundInterface; MAC is zero while it is not known
	Binding   string         // how KubeVirt wires it: "masquerade", "bridge", or the plugin name
	// FromPod says that the MAC is the pod interface's: with masquerade and bridge, KubeVirt gives the guest
	// NIC the pod's primary interface MAC when the VMI sets none (pkg/network/domainspec/generators.go
	// TapLibvirtSpecGenerator, before OnDefineDomain); network-status and pod-networks carry it (podInterfaceMAC).
	FromPod bool
	// Unservable says why the MAC cannot be known before the domain is defined ("" when it can): other
	// bindings leave it to libvirt, which makes one up at define time, after cloud-init data is built.
	Unservable string
}

// FindPodNIC returns the VMI's pod-network interface when it is not bound to us, with its MAC from the
// VMI's macAddress or, for masquerade and bridge, from the pod's primary interface in snap (snap may be
// nil: then only the VMI's MAC is used). Nil when the VMI has no such interface.
func FindPodNIC(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, bindingName string) (*PodNIC, error) {
	if vmi == nil {
		return nil, nil
	}
	onPodNetwork := func(iface Interface) bool {
		return slices.ContainsFunc(vmi.Spec.Networks, func(n Network) bool { return n.Name == iface.Name && n.Pod != nil })
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if !onPodNetwork(iface) || isBound(iface, bindingName) || iface.State == InterfaceStateAbsent {
			continue
		}
		f := ifaceFailer{iface: iface.Name, network: iface.Name}
		nic := &PodNIC{Interface: BoundInterface{Name: iface.Name, Network: iface.Name, DHCP: true, Virtio: true}, Binding: podBindingName(iface)}
		if iface.MacAddress != "" {
			mac, err := parseMAC(iface.MacAddress)
			if err != nil {
				return nil, f.fail(SourceVMI, "macAddress", err)
			}
			if !mac.IsZero() {
				nic.Interface.MAC, nic.Interface.MACSource = mac, MACFromVMI
				return nic, nil
			}
		}
		if iface.Masquerade == nil && iface.Bridge == nil {
			nic.Unservable = fmt.Sprintf("binding %s leaves the guest MAC to libvirt, which makes one up when the domain is "+
				"defined, after the cloud-init data is built", nic.Binding)
			return nic, nil
		}
		nic.FromPod = true
		if snap != nil {
			var err error
			if nic.Interface.MAC, nic.Interface.MACSource, err = podInterfaceMAC(snap, f); err != nil {
				return nil, err
			}
		}
		return nic, nil
	}
	return nil, nil
}

// MissingForPodNIC lists the pod NIC's MAC while the pod interface's MAC is not in snap yet (masquerade
// and bridge without macAddress). Call it only when our config replaces cloud-init's fallback (no user
// networkData). Wrong input and unservable NICs are not missing: the caller reports them.
func MissingForPodNIC(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, bindingName string) []downwardapi.Missing {
	nic, err := FindPodNIC(vmi, snap, bindingName)
	if err != nil || nic == nil || !nic.Interface.MAC.IsZero() || !nic.FromPod {
		return nil
	}
	return []downwardapi.Missing{{
		Interface: nic.Interface.Name, Network: nic.Interface.Network,
		Source: downwardapi.NetworkStatusAnnotation + " (entry with default: true) or " + downwardapi.PodNetworksAnnotation +
			" (primary role)",
		Field: "mac",
	}}
}

func podBindingName(iface Interface) string {
	switch {
	case iface.Masquerade != nil:
		return "masquerade"
	case iface.Bridge != nil:
		return "bridge"
	case iface.Binding != nil && iface.Binding.Name != "":
		return netval.Quote(iface.Binding.Name)
	default:
		return "(none)"
	}
}

// podInterfaceMAC is the MAC of the pod's primary interface, the same on every call whatever the map order:
//   - network-status: the mac, when set and not all-zero, of the first entry marked default with an interface
//     name (KubeVirt pkg/network/multus/status.go LookupPodPrimaryIfaceName); a later one is another interface.
//   - else pod-networks: the entry whose role is primary (two with different MACs are ambiguous: an error),
//     else the one keyed "default" without a role (OVN-K before roles).
//
// The MAC is zero, with no source, when neither has one; a bad input is an *InputError from f.
func podInterfaceMAC(snap *downwardapi.Snapshot, f ifaceFailer) (netval.MAC, MACSource, error) {
	for _, st := range snap.NetworkStatus {
		if !st.Default || st.Interface == "" {
			continue
		}
		if st.Mac != "" {
			m, err := parseMAC(st.Mac)
			if err != nil {
				return netval.MAC{}, "", f.fail(downwardapi.NetworkStatusAnnotation, "mac", err)
			}
			if !m.IsZero() {
				return m, MACFromNetworkStatus, nil
			}
		}
		break // the primary interface is this one: no later entry speaks for it
	}
	var primaryKey string
	for _, key := range slices.Sorted(maps.Keys(snap.PodNetworks)) {
		pn := snap.PodNetworks[key]
		if pn.Role != RolePrimary || pn.MAC.IsZero() {
			continue
		}
		if primaryKey == "" {
			primaryKey = key
			continue
		}
		if other := snap.PodNetworks[primaryKey]; other.MAC != pn.MAC {
			return netval.MAC{}, "", f.fail(downwardapi.PodNetworksAnnotation, "role", fmt.Errorf("entries %s and %s both have role %q "+
				"with different MACs, and network-status marks no default interface: the pod's primary interface is ambiguous",
				netval.Quote(primaryKey), netval.Quote(key), RolePrimary))
		}
	}
	if pn := snap.PodNetworks[defaultPodNetworksKey]; primaryKey == "" && pn.Role == "" && !pn.MAC.IsZero() {
		primaryKey = defaultPodNetworksKey
	}
	if primaryKey == "" {
		return netval.MAC{}, "", nil
	}
	m := snap.PodNetworks[primaryKey].MAC
	if err := m.CheckUnicast(); err != nil {
		return netval.MAC{}, "", f.fail(downwardapi.PodNetworksAnnotation, "mac_address", err)
	}
	return m, MACFromPodNetworks, nil
}
