package domain

import (
	"fmt"

	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

const (
	// userAliasPrefix marks a user-defined libvirt alias; KubeVirt's api.Alias strips it on unmarshal
	// (pkg/virt-launcher/virtwrap/api/schema.go, UserAliasPrefix).
	userAliasPrefix = "ua-"
	// sriovAliasPrefix is what KubeVirt's NetStat looks for to report a hostdev as the VMI interface
	// named by the rest of the alias (pkg/network/deviceinfo/sriov.go, SRIOVAliasPrefix;
	// pkg/network/setup/netstat.go, sriovIfacesStatusFromDomainHostDevices).
	sriovAliasPrefix = "sriov-"

	deviceTypePCI = "pci"
)

// HostdevAlias is the libvirt alias of the hostdev that carries interface ifaceName's VF.
func HostdevAlias(ifaceName string) string {
	return userAliasPrefix + sriovAliasPrefix + ifaceName
}

// interfaceAlias is the alias KubeVirt gives an <interface> it wires for VMI interface ifaceName.
func interfaceAlias(ifaceName string) string {
	return userAliasPrefix + ifaceName
}

func validateIfaceName(name string) error {
	// KubeVirt's rule is a subset of what libvirt accepts in a user alias.
	if !model.ValidInterfaceName(name) {
		return fmt.Errorf("%w: interface name %q: want letters, digits, '-' or '_' (KubeVirt's own rule)", ErrInvalidInterface, name)
	}
	return nil
}

// newHostdev builds the <hostdev> for one bound interface from its device-info and VMI spec.
func newHostdev(iface model.BoundInterface) (*libvirtxml.DomainHostdev, error) {
	if iface.DeviceType != "" && iface.DeviceType != deviceTypePCI {
		return nil, fmt.Errorf("%w: interface %q (network %q): device-info type %q, only %q can be a hostdev",
			ErrUnsupportedDeviceType, iface.Name, iface.Network, iface.DeviceType, deviceTypePCI)
	}
	if iface.HostPCIAddress == "" {
		return nil, fmt.Errorf("%w: interface %q (network %q): no device-info PCI address",
			ErrMissingDeviceInfo, iface.Name, iface.Network)
	}
	host, err := parsePCIAddress(iface.HostPCIAddress)
	if err != nil {
		return nil, fmt.Errorf("interface %q (network %q): device-info pci-address: %w", iface.Name, iface.Network, err)
	}
	hostdev := &libvirtxml.DomainHostdev{
		Managed: "no", // the VF is bound to vfio-pci by the device plugin, not by libvirt
		SubsysPCI: &libvirtxml.DomainHostdevSubsysPCI{
			Source: &libvirtxml.DomainHostdevSubsysPCISource{Address: host},
		},
		Alias: &libvirtxml.DomainAlias{Name: HostdevAlias(iface.Name)},
	}
	if iface.GuestPCIAddress != "" {
		guest, err := parsePCIAddress(iface.GuestPCIAddress)
		if err != nil {
			return nil, fmt.Errorf("interface %q (network %q): VMI pciAddress: %w", iface.Name, iface.Network, err)
		}
		hostdev.Address = &libvirtxml.DomainAddress{PCI: guest}
	}
	if iface.BootOrder != nil {
		if *iface.BootOrder == 0 {
			return nil, fmt.Errorf("%w: interface %q (network %q): VMI bootOrder 0, want >= 1",
				ErrInvalidInterface, iface.Name, iface.Network)
		}
		hostdev.Boot = &libvirtxml.DomainDeviceBoot{Order: *iface.BootOrder}
	}
	return hostdev, nil
}

// parsePCIAddress converts "0000:65:00.2" into libvirt's PCI address; the rule (widths, slot and
// function bounds) is pkg/netval's, the same that downwardapi and model applied at the input.
func parsePCIAddress(s string) (*libvirtxml.DomainAddressPCI, error) {
	a, err := netval.ParsePCIAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPCIAddress, err)
	}
	domain, bus, slot, function := uint(a.Domain), uint(a.Bus), uint(a.Slot), uint(a.Function)
	return &libvirtxml.DomainAddressPCI{Domain: &domain, Bus: &bus, Slot: &slot, Function: &function}, nil
}
