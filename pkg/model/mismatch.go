package model

import (
	"bytes"
	"net"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// MACMismatch is a bound interface whose VMI macAddress differs from the MAC Multus reports for it in
// network-status. The VMI's wins (Build takes it first), so the guest NIC is matched by a MAC the CNI
// did not report: usually a sign that the VF's MAC was not set as the VMI asked.
type MACMismatch struct {
	Interface     string
	Network       string
	VMI           net.HardwareAddr
	NetworkStatus net.HardwareAddr
}

// MACMismatches lists the bound interfaces whose VMI macAddress and network-status "mac" differ. Like
// the Missing* functions it reports nothing when Build would fail.
func MACMismatches(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) []MACMismatch {
	ds, err := build(vmi, snap, opts)
	if err != nil {
		return nil
	}
	var out []MACMismatch
	for _, d := range ds {
		if d.MACSource == MACFromVMI && d.statusMAC != nil && !bytes.Equal(d.MAC, d.statusMAC) {
			out = append(out, MACMismatch{Interface: d.Name, Network: d.Network, VMI: d.MAC, NetworkStatus: d.statusMAC})
		}
	}
	return out
}
