package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// knownDeviceTypes are the device-info types Multus defines. Only "pci" can be wired as a VF hostdev; the
// others are recorded in DeviceType for the domain step to reject.
var knownDeviceTypes = []string{downwardapi.DeviceInfoTypePCI, downwardapi.DeviceInfoTypeVDPA,
	downwardapi.DeviceInfoTypeVHostUser, downwardapi.DeviceInfoTypeMemif}

// setDeviceInfo takes device-info from the device-info file, else the kubevirt.io/network-info
// annotation, else network-status device-info (docs/design.md section 2).
func (d *derived) setDeviceInfo(st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface, f ifaceFailer) error {
	var di *downwardapi.DeviceInfo
	var source, field string
	switch {
	case fileInfo != nil && fileInfo.DeviceInfo != nil:
		di, source, field = fileInfo.DeviceInfo, SourceDeviceInfoFile, "interfaces[].deviceInfo"
	case annInfo != nil && annInfo.DeviceInfo != nil:
		di, source, field = annInfo.DeviceInfo, downwardapi.NetworkInfoAnnotation, "interfaces[].deviceInfo"
	case st != nil && st.DeviceInfo != nil:
		di, source, field = st.DeviceInfo, downwardapi.NetworkStatusAnnotation, "device-info"
	default:
		return nil
	}
	if !slices.Contains(knownDeviceTypes, di.Type) {
		return f.fail(source, field+".type", fmt.Errorf("unknown device type %s", netval.Quote(di.Type)))
	}
	d.DeviceType = di.Type
	if di.Type != downwardapi.DeviceInfoTypePCI {
		return nil
	}
	if di.Pci == nil || di.Pci.PciAddress == "" {
		return f.fail(source, field+".pci.pci-address", errors.New("device type pci without a PCI address"))
	}
	if _, err := netval.ParsePCIAddress(di.Pci.PciAddress); err != nil {
		return f.fail(source, field+".pci.pci-address", err)
	}
	d.HostPCIAddress = strings.ToLower(di.Pci.PciAddress)
	return nil
}
