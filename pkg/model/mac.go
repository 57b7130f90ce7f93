package model

import (
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// setMAC applies the precedence of docs/design.md section 2: VMI macAddress, network-status mac, network-info
// mac (a copy of network-status mac, there when only device-info is mounted; the file before the annotation),
// pod-networks mac_address. Every present value is validated; all-zero counts as absent.
func (d *derived) setMAC(vmiMAC string, st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface,
	pn *downwardapi.PodNetwork, f ifaceFailer) error {
	type candidate struct {
		source              MACSource
		where, field, value string
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
		if !mac.IsZero() && d.MAC.IsZero() {
			d.MAC, d.MACSource = mac, c.source
		}
		switch {
		case c.source == MACFromNetworkStatus:
			d.statusMAC = mac
		case c.source == MACFromNetworkInfo && d.infoMAC.IsZero():
			d.infoMAC, d.infoMACSource = mac, c.where
		}
	}
	if pn != nil && !pn.MAC.IsZero() {
		if err := pn.MAC.CheckUnicast(); err != nil {
			return f.fail(downwardapi.PodNetworksAnnotation, "mac_address", err)
		}
		if d.MAC.IsZero() {
			d.MAC, d.MACSource = pn.MAC, MACFromPodNetworks
		}
	}
	return nil
}

// parseMAC reads a MAC for a guest Ethernet NIC: 48-bit and unicast. The all-zero MAC means absent
// (zero, nil): SR-IOV CNI reports a VF without an administrative MAC so.
func parseMAC(s string) (netval.MAC, error) {
	m, err := netval.ParseMAC(s)
	if err != nil {
		return netval.MAC{}, err
	}
	if err := m.CheckUnicast(); err != nil {
		return netval.MAC{}, err
	}
	return m, nil
}
