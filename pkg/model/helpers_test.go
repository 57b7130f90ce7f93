package model_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

const (
	testBinding = "sriov-udn"
	testNS      = "ns1"
)

// ifaceSpec is one VMI interface and its network, for newVMI.
type ifaceSpec struct {
	name    string
	nad     string // multus.networkName; "" with pod=true for a pod network
	binding string // binding plugin name; "" = sriov (core binding)
	mac     string
	pci     string
	boot    *uint
	absent  bool
	pod     bool
	def     bool   // multus.default
	core    string // "masquerade" or "bridge": that core binding instead of sriov/plugin
}

func newVMI(ifaces ...ifaceSpec) *model.VirtualMachineInstance {
	vmi := &kvv1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm1", testNS, "uid-1"
	for _, s := range ifaces {
		iface := kvv1.Interface{Name: s.name, MacAddress: s.mac, PciAddress: s.pci, BootOrder: s.boot}
		switch {
		case s.core == "masquerade":
			iface.Masquerade = &kvv1.InterfaceMasquerade{}
		case s.core == "bridge":
			iface.Bridge = &kvv1.InterfaceBridge{}
		case s.binding != "":
			iface.Binding = &kvv1.PluginBinding{Name: s.binding}
		default:
			iface.SRIOV = &kvv1.InterfaceSRIOV{}
		}
		if s.absent {
			iface.State = kvv1.InterfaceStateAbsent
		}
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, iface)
		n := kvv1.Network{Name: s.name}
		if s.pod {
			n.Pod = &kvv1.PodNetwork{}
		} else {
			n.Multus = &kvv1.MultusNetwork{NetworkName: s.nad, Default: s.def}
		}
		vmi.Spec.Networks = append(vmi.Spec.Networks, n)
	}
	return fromKubeVirt(vmi)
}

// fromKubeVirt hands a VMI built with KubeVirt's own types to the model the way virt-launcher does:
// marshalled to JSON, decoded by model.DecodeVMI. It panics on error: the input is test code.
func fromKubeVirt(vmi *kvv1.VirtualMachineInstance) *model.VirtualMachineInstance {
	raw, err := json.Marshal(vmi)
	if err != nil {
		panic(err)
	}
	out, err := model.DecodeVMI(raw)
	if err != nil {
		panic(err)
	}
	return out
}

func bound(name, nad string) ifaceSpec { return ifaceSpec{name: name, nad: nad, binding: testBinding} }

// podNetworkJSON mirrors the k8s.ovn.org/pod-networks value, for building test snapshots.
type podNetworkJSON struct {
	IPAddresses []string `json:"ip_addresses"`
	MACAddress  string   `json:"mac_address"`
	GatewayIPs  []string `json:"gateway_ips"`
	Routes      []struct {
		Dest    string `json:"dest"`
		NextHop string `json:"nextHop"`
	} `json:"routes"`
	IPv6LLAGatewayIP string `json:"ipv6_lla_gateway_ip"`
	TunnelID         int    `json:"tunnel_id"`
	Role             string `json:"role"`
	IPAMMode         string `json:"ipam_mode"`
}

// decodePodNetworks converts annotation JSON into downwardapi.PodNetworks. It is test scaffolding
// that does not depend on the downwardapi parser, which another package owns.
func decodePodNetworks(data []byte) (downwardapi.PodNetworks, error) {
	var raw map[string]podNetworkJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := downwardapi.PodNetworks{}
	for key, r := range raw {
		pn := downwardapi.PodNetwork{TunnelID: r.TunnelID, Role: r.Role, IPAMMode: r.IPAMMode}
		for _, s := range r.IPAddresses {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%s ip_addresses: %w", key, err)
			}
			pn.IPAddresses = append(pn.IPAddresses, p)
		}
		if r.MACAddress != "" {
			mac, err := netval.ParseMAC(r.MACAddress)
			if err != nil {
				return nil, fmt.Errorf("%s mac_address: %w", key, err)
			}
			pn.MAC = mac
		}
		for _, s := range r.GatewayIPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%s gateway_ips: %w", key, err)
			}
			pn.Gateways = append(pn.Gateways, a)
		}
		for _, rt := range r.Routes {
			dest, err := netip.ParsePrefix(rt.Dest)
			if err != nil {
				return nil, fmt.Errorf("%s routes dest: %w", key, err)
			}
			var hop netip.Addr
			if rt.NextHop != "" {
				if hop, err = netip.ParseAddr(rt.NextHop); err != nil {
					return nil, fmt.Errorf("%s routes nextHop: %w", key, err)
				}
			}
			pn.Routes = append(pn.Routes, downwardapi.PodRoute{Dest: dest, NextHop: hop})
		}
		if r.IPv6LLAGatewayIP != "" {
			a, err := netip.ParseAddr(r.IPv6LLAGatewayIP)
			if err != nil {
				return nil, fmt.Errorf("%s ipv6_lla_gateway_ip: %w", key, err)
			}
			pn.IPv6LLAGateway = a
		}
		out[key] = pn
	}
	return out, nil
}

func podNetworks(t testing.TB, js string) downwardapi.PodNetworks {
	t.Helper()
	pn, err := decodePodNetworks([]byte(js))
	require.NoError(t, err)
	return pn
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
