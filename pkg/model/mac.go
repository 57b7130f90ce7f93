package model

import (
	"fmt"
	"net"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// setMAC applies DESIGN.md's precedence: VMI macAddress, network-status mac, network-info mac (a copy
// of network-status mac, present when only device-info is mounted; the device-info file before the
// annotation), pod-networks mac_address. Every
// present value is validated; an all-zero MAC counts as absent (SR-IOV CNI reports no admin MAC so).
func (d *derived) setMAC(vmiMAC string, st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface,
	pn *downwardapi.PodNetwork, f ifaceFailer) error {
	type candidate struct {
		source MACSource
		where  string
		field  string
		value  string
	}
	cands := []candidate{{MACFromVMI, SourceVMI, "spec.domain.devices.interfaces[].macAddress", vmiMAC}}
	if st != nil {
		cands = append(cands, candidate{MACFromNetworkStatus, downwardapi.NetworkStatusAnnotation, "mac", st.Mac})
	}
	if fileInfo != nil {
		cands = append(cands, candidate{MACFromNetworkInfo, SourceDeviceInfoFile, "interfaces[].mac", fileInfo.Mac})
	}
	if annInfo != nil {
		cands = append(cands, candidate{MACFromNetworkInfo, downwardapi.NetworkInfoAnnotation, "interfaces[].mac", annInfo.Mac})
	}
	for _, c := range cands {
		if c.value == "" {
			continue
		}
		mac, err := parseMAC(c.value)
		if err != nil {
			return f.fail(c.where, c.field, err)
		}
		if mac != nil && d.MAC == nil {
			d.MAC, d.MACSource = mac, c.source
		}
		switch {
		case c.source == MACFromNetworkStatus:
			d.statusMAC = mac
		case c.source == MACFromNetworkInfo && d.infoMAC == nil:
			d.infoMAC, d.infoMACSource = mac, c.where
		}
	}
	if pn != nil && len(pn.MAC) > 0 {
		mac, err := checkedMAC(pn.MAC)
		if err != nil {
			return f.fail(downwardapi.PodNetworksAnnotation, "mac_address", err)
		}
		if d.MAC == nil && mac != nil {
			d.MAC, d.MACSource = mac, MACFromPodNetworks
		}
	}
	return nil
}

// parseMAC reads a MAC for a guest Ethernet NIC: 48-bit and unicast. The all-zero MAC means absent
// (nil, nil): SR-IOV CNI reports a VF without an administrative MAC so.
func parseMAC(s string) (net.HardwareAddr, error) {
	m, err := netval.ParseMAC(s)
	if err != nil {
		return nil, err
	}
	return guestMAC(m)
}

// checkedMAC applies parseMAC's rules to a MAC downwardapi has already parsed (pod-networks).
func checkedMAC(hw net.HardwareAddr) (net.HardwareAddr, error) {
	m, ok := netval.MACFromHardwareAddr(hw)
	if !ok {
		return nil, fmt.Errorf("MAC %s is not a 48-bit Ethernet address", netval.Quote(hw.String()))
	}
	return guestMAC(m)
}

func guestMAC(m netval.MAC) (net.HardwareAddr, error) {
	if err := m.CheckUnicast(); err != nil {
		return nil, err
	}
	return m.HardwareAddr(), nil
}
