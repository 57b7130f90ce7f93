package model

// FallbackInterface is the VMI's pod-network interface when it is not ours: the NIC cloud-init's
// DHCP fallback would have configured. Any network-config the sidecar writes replaces that fallback
// (cloud-init renders the fallback only when the datasource has no network config: stages.py
// _find_networking_config), so the writer must configure this NIC too. It is returned as a DHCP
// BoundInterface (DHCPv4, as the fallback does) matched by the VMI's macAddress; MAC is nil when
// the VMI sets none, and the caller must then refuse rather than leave the pod network down.
// Nil when the VMI has no such interface.
func FallbackInterface(vmi *VirtualMachineInstance, bindingName string) (*BoundInterface, error) {
	if vmi == nil {
		return nil, nil
	}
	pod := make(map[string]bool, len(vmi.Spec.Networks))
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod[n.Name] = true
		}
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if !pod[iface.Name] || isBound(iface, bindingName) || iface.State == InterfaceStateAbsent {
			continue
		}
		fb := &BoundInterface{Name: iface.Name, Network: iface.Name, DHCP: true, Virtio: true}
		if iface.MacAddress != "" {
			mac, err := parseMAC(iface.MacAddress)
			if err != nil {
				return nil, &InputError{Interface: iface.Name, Network: iface.Name, Source: SourceVMI, Field: "macAddress", Err: err}
			}
			fb.MAC, fb.MACSource = mac, MACFromVMI
		}
		return fb, nil
	}
	return nil, nil
}
