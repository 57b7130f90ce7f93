package model

import (
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// MACMismatch is a bound interface whose VMI macAddress differs from the MAC the CNI reports for it:
// network-status "mac", or, without network-status (device-info only), network-info "mac". The VMI's
// wins (Build takes it first), so the guest NIC is matched by a MAC the CNI did not report: usually a
// sign that the VF's MAC was not set as the VMI asked.
type MACMismatch struct {
	Interface string
	Network   string
	VMI       netval.MAC
	// NetworkStatus is network-status's MAC, zero when the comparison was with network-info; ReportedBy
	// names the source compared with: an annotation key or the device-info file path.
	NetworkStatus netval.MAC
	ReportedBy    string
}

// MACMismatches lists the bound interfaces whose VMI macAddress and CNI-reported MAC differ; nothing when
// Build would fail.
func (dv *Derivation) MACMismatches() []MACMismatch {
	var out []MACMismatch
	for _, d := range dv.ds {
		if d.MACSource != MACFromVMI {
			continue
		}
		switch {
		case !d.statusMAC.IsZero():
			if d.MAC != d.statusMAC {
				out = append(out, MACMismatch{Interface: d.Name, Network: d.Network, VMI: d.MAC, NetworkStatus: d.statusMAC,
					ReportedBy: downwardapi.NetworkStatusAnnotation})
			}
		case !d.infoMAC.IsZero():
			if d.MAC != d.infoMAC {
				out = append(out, MACMismatch{Interface: d.Name, Network: d.Network, VMI: d.MAC, ReportedBy: d.infoMACSource})
			}
		}
	}
	return out
}

// NetworkInfoMismatch is a bound interface whose network-info entry (KubeVirt's copy of network-status,
// in the device-info file or the kubevirt.io/network-info annotation) disagrees with network-status on
// Field ("mac" or "mtu"). network-status wins (setMAC, setMTU); a disagreement means the copy is stale
// or something rewrote one of the annotations.
type NetworkInfoMismatch struct {
	Interface string
	Network   string
	Field     string
	Source    string // where the disagreeing network-info value came from (file path or annotation key)
}

// NetworkInfoMismatches lists, per bound interface and field, where network-info and network-status
// both have a mac or an mtu and the two differ. It reports nothing when Build would fail.
func (dv *Derivation) NetworkInfoMismatches() []NetworkInfoMismatch {
	var out []NetworkInfoMismatch
	for _, d := range dv.ds {
		if !d.statusMAC.IsZero() && !d.infoMAC.IsZero() && d.statusMAC != d.infoMAC {
			out = append(out, NetworkInfoMismatch{Interface: d.Name, Network: d.Network, Field: "mac", Source: d.infoMACSource})
		}
		if d.statusMTU != 0 && d.infoMTU != 0 && d.statusMTU != d.infoMTU {
			out = append(out, NetworkInfoMismatch{Interface: d.Name, Network: d.Network, Field: "mtu", Source: d.infoMTUSource})
		}
	}
	return out
}
