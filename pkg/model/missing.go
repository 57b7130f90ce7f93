package model

import (
	"fmt"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// Sources named in Missing items that more than one input can satisfy.
var (
	sourceL3 = downwardapi.NetworkStatusAnnotation + " or " + downwardapi.PodNetworksAnnotation
	// Naming the VMI tells the operator how to unblock a NIC whose CNI reports no MAC.
	sourceMAC        = "spec.domain.devices.interfaces[].macAddress, " + sourceL3
	sourceDeviceInfo = SourceDeviceInfoFile + ", " + downwardapi.NetworkInfoAnnotation + " or " + downwardapi.NetworkStatusAnnotation
)

// The Missing* functions say what a consumer still lacks; empty means ready (nil when Build would fail).

// MissingForCloudInit lists, per bound interface, what cloud-init needs: a MAC to match the guest NIC,
// and the interface's network-status or pod-networks entry (addresses, or DHCP from ipam_mode). An
// entry with no addresses (IPAM-less network) is ready: there is nothing more to wait for.
func MissingForCloudInit(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) []downwardapi.Missing {
	return Derive(vmi, snap, opts).MissingForCloudInit()
}

// MissingForCloudInit is the package function of that name, on this derivation.
func (dv *Derivation) MissingForCloudInit() []downwardapi.Missing {
	var out []downwardapi.Missing
	for _, d := range dv.ds {
		if !d.hasNetworkStatus && !d.hasPodNetworks {
			out = append(out, downwardapi.Missing{Interface: d.Name, Network: d.Network, Source: sourceL3,
				Field: fmt.Sprintf("entry for pod interface %q or key %q", d.PodInterfaceName, d.podNetworksKey)})
		}
		if d.MAC.IsZero() {
			out = append(out, downwardapi.Missing{Interface: d.Name, Network: d.Network, Source: sourceMAC, Field: "mac"})
		}
	}
	return out
}

// MissingForDomain lists the bound interfaces whose VF host PCI address is not known yet, except
// those skip says KubeVirt already wired (skip may be nil). A device-info of another type than pci is
// not missing: it is there, and the domain step rejects it with a clear error.
func (dv *Derivation) MissingForDomain(skip func(ifaceName string) bool) []downwardapi.Missing {
	var out []downwardapi.Missing
	for _, d := range dv.ds {
		if skip != nil && skip(d.Name) {
			continue
		}
		if d.DeviceType == "" {
			out = append(out, downwardapi.Missing{Interface: d.Name, Network: d.Network, Source: sourceDeviceInfo,
				Field: "deviceInfo.pci.pci-address"})
		}
	}
	return out
}
