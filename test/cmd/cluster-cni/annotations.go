package main

import (
	"encoding/json"
	"fmt"
	"net/netip"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// The annotations this plugin writes, and the label that asks for a malformed network-status.
const (
	NetworkStatusAnnotation = nadv1.NetworkStatusAnnot // Multus
	PodNetworksAnnotation   = ovn.PodNetworksAnnotation
	MalformedLabel          = "cluster.sriov-udn.test/network-status"
	MalformedLabelValue     = "malformed"
)

// OVN-K's network roles (go-controller/pkg/types/const.go NetworkRolePrimary, NetworkRoleSecondary,
// NetworkRoleInfrastructure) and its default key for the cluster network.
const (
	rolePrimary     = "primary"
	roleSecondary   = "secondary"
	roleInfraLocked = "infrastructure-locked"
	defaultNetKey   = "default"
)

// OVN-K's default values for what its pod routes point at (ovn-org/ovn-kubernetes go-controller/pkg/config:
// Gateway.V4JoinSubnet/V6JoinSubnet for the cluster network; the UserDefinedNetwork joinSubnets default
// 100.65.0.0/16 and fd99::/64 for a primary UDN; Gateway.MasqueradeIPs.V{4,6}OVNServiceHairpinMasqueradeIP,
// the ".5" of the masquerade subnets 169.254.0.0/17 and fd69::/112).
var (
	joinSubnetV4    = netip.MustParsePrefix("100.64.0.0/16")
	joinSubnetV6    = netip.MustParsePrefix("fd98::/64")
	udnJoinSubnetV4 = netip.MustParsePrefix("100.65.0.0/16")
	udnJoinSubnetV6 = netip.MustParsePrefix("fd99::/64")
	hairpinV4       = netip.MustParsePrefix("169.254.0.5/32")
	hairpinV6       = netip.MustParsePrefix("fd69::5/128")
)

// Attachment is one secondary network of the pod as ADD set it up.
type Attachment struct {
	Selection nadv1.NetworkSelectionElement
	NAD       NADConfig
	PodIface  string  // the interface name Multus reports (the selection's, else net<n>)
	MAC       string  // the device's MAC; "" when no device was made
	Result    *Result // host-local's allocation; nil when the network has no address
}

// AnnotationInput is everything the annotations are made of.
type AnnotationInput struct {
	Pod            *corev1.Pod
	DefaultNetwork string // the pod network's CNI name (Multus reports the cluster network by it)
	PodIfName      string // CNI_IFNAME, eth0
	PodNetwork     PodNetworkConfig
	Default        *Result // the bridge plugin's result for eth0
	Attachments    []Attachment
}

// BuildAnnotations returns the values of k8s.v1.cni.cncf.io/network-status and k8s.ovn.org/pod-networks
// for the pod, keyed by annotation. It is pure: the pod, its NADs and what was allocated go in.
func BuildAnnotations(in AnnotationInput) (map[string]string, error) {
	if in.Pod == nil || in.Default == nil {
		return nil, fmt.Errorf("build annotations: pod and pod-network result are required")
	}
	statuses, err := networkStatuses(in)
	if err != nil {
		return nil, err
	}
	ns, err := json.Marshal(statuses)
	if err != nil {
		return nil, fmt.Errorf("marshal %s of pod %s/%s: %w", NetworkStatusAnnotation, in.Pod.Namespace, in.Pod.Name, err)
	}
	if in.Pod.Labels[MalformedLabel] == MalformedLabelValue {
		// A strict prefix of a JSON array never parses: the "bad input on a live pod" scenario.
		ns = ns[:len(ns)/2]
	}
	pn, err := podNetworks(in)
	if err != nil {
		return nil, err
	}
	pnJSON, err := json.Marshal(pn)
	if err != nil {
		return nil, fmt.Errorf("marshal %s of pod %s/%s: %w", PodNetworksAnnotation, in.Pod.Namespace, in.Pod.Name, err)
	}
	return map[string]string{NetworkStatusAnnotation: string(ns), PodNetworksAnnotation: string(pnJSON)}, nil
}

// networkStatuses is the list Multus writes: the cluster network first (default: true), then each
// secondary network in the order of the selection annotation. Each entry is what
// network-attachment-definition-client v1.7.7 pkg/utils/net-attach-def.go CreateNetworkStatuses makes of
// the delegate's result: the sandbox interface's name and MAC, its IPs without prefix, the gateways of
// the result's default routes, the result's DNS. For an SR-IOV network it adds the device-info Multus
// reads from the SR-IOV device plugin (https://github.com/k8snetworkplumbingwg/device-info-spec, v1.1.0:
// type "pci", pci.pci-address), and names it "<namespace>/<nad>"
// (https://github.com/k8snetworkplumbingwg/multus-cni/blob/master/docs/how-to-use.md, "network-status").
// A `none` network is left out (it stands for nothing on a node).
func networkStatuses(in AnnotationInput) ([]nadv1.NetworkStatus, error) {
	def := nadv1.NetworkStatus{Name: in.DefaultNetwork, Interface: in.PodIfName, Default: true, IPs: []string{}}
	sandboxIdx := -1
	for i, ifc := range in.Default.Interfaces {
		if ifc.Sandbox != "" && ifc.Name == in.PodIfName {
			sandboxIdx = i
			def.Mac = ifc.Mac
		}
	}
	if sandboxIdx < 0 {
		return nil, fmt.Errorf("pod-network result has no sandbox interface %s", in.PodIfName)
	}
	for _, ip := range in.Default.IPs {
		if ip.Interface == nil || *ip.Interface == sandboxIdx {
			a, err := netip.ParsePrefix(ip.Address)
			if err != nil {
				return nil, fmt.Errorf("pod-network result address %s: %w", netval.Quote(ip.Address), err)
			}
			def.IPs = append(def.IPs, a.Addr().String())
		}
	}
	def.Gateway = defaultRouteGateways(in.Default)
	def.DNS = convertDNS(in.Default.DNS)
	out := []nadv1.NetworkStatus{def}
	for _, a := range in.Attachments {
		if a.NAD.Type == typeNone {
			// The none network exists only to carry the VF stand-in's own binding (test/cluster registers it as a
			// second binding plugin, which needs an interface and a network): a node has no such network, so
			// KubeVirt must not see it. Listed, it would give the VMI a multus-status interface that no domain
			// device has, which stock virt-launcher picks for NIC hot-plug on every sync.
			continue
		}
		st, err := attachmentStatus(a)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// attachmentStatus is a secondary network's network-status entry.
func attachmentStatus(a Attachment) (nadv1.NetworkStatus, error) {
	st := nadv1.NetworkStatus{
		Name:      a.Selection.Namespace + "/" + a.Selection.Name,
		Interface: a.PodIface,
		Mac:       a.MAC,
	}
	if a.Result != nil {
		st.IPs = []string{}
		for _, ip := range a.Result.IPs {
			p, err := netip.ParsePrefix(ip.Address)
			if err != nil {
				return st, fmt.Errorf("network %s result address %s: %w", st.Name, netval.Quote(ip.Address), err)
			}
			st.IPs = append(st.IPs, p.Addr().String())
		}
		st.Gateway = defaultRouteGateways(a.Result)
		st.DNS = convertDNS(a.Result.DNS)
	}
	if a.NAD.Type == typeBridge {
		st.Mtu = a.NAD.MTU
	}
	if a.NAD.Type == typeSRIOV {
		st.Mtu = a.NAD.MTU
		st.DeviceInfo = &nadv1.DeviceInfo{
			Type:    nadv1.DeviceInfoTypePCI,
			Version: nadv1.DeviceInfoVersion,
			Pci:     &nadv1.PciDevice{PciAddress: a.NAD.DeviceID},
		}
	}
	return st, nil
}

func defaultRouteGateways(r *Result) []string {
	var gws []string
	for _, rt := range r.Routes {
		p, err := netip.ParsePrefix(rt.Dst)
		if err == nil && p.Bits() == 0 && rt.GW != "" {
			gws = append(gws, rt.GW)
		}
	}
	return gws
}

func convertDNS(d ResultDNS) nadv1.DNS {
	return nadv1.DNS{Nameservers: d.Nameservers, Domain: d.Domain, Search: d.Search, Options: d.Options}
}

// podNetworks is the map ovnkube-controller writes: "default" for the cluster network, "<ns>/<nad>" for each
// SR-IOV user-defined network. Roles, gateways and routes follow OVN-K's AddRoutesGatewayIP
// (go-controller/pkg/util/pod_annotation.go): the cluster network is "primary" (routes to the cluster
// subnet, the service subnets, the hairpin masquerade IP and the join subnet through its gateway, plus the
// gateway itself unless another network claims that family's default route), or "infrastructure-locked"
// when a UDN is primary (cluster subnet and join subnet routes only, no gateway). A secondary UDN gets the
// gateways its selection's default-route asks for and the non-default routes its IPAM returned (none on a
// layer2 topology). Networks of other NAD types are not OVN-K's and are not listed.
func podNetworks(in AnnotationInput) (ovn.PodNetworks, error) {
	out := ovn.PodNetworks{}
	udnPrimary := false
	requested := map[bool]bool{} // family (is4) -> some selection asks for the default route
	for _, a := range in.Attachments {
		if a.NAD.Type == typeSRIOV && a.NAD.Role == rolePrimary {
			udnPrimary = true
		}
		for _, gw := range a.Selection.GatewayRequest {
			requested[gw.To4() != nil] = true
		}
	}
	defRole := rolePrimary
	if udnPrimary {
		defRole = roleInfraLocked
	}
	def := ovn.PodNetwork{Role: defRole}
	for _, ifc := range in.Default.Interfaces {
		if ifc.Sandbox != "" && ifc.Name == in.PodIfName {
			def.MACAddress = ifc.Mac
		}
	}
	clusterSubnets := []string{in.PodNetwork.SubnetV4, in.PodNetwork.SubnetV6}
	for _, ip := range in.Default.IPs {
		addr, err := netip.ParsePrefix(ip.Address)
		if err != nil {
			return nil, fmt.Errorf("pod-network result address %s: %w", netval.Quote(ip.Address), err)
		}
		def.IPAddresses = append(def.IPAddresses, addr.String())
		if ip.Gateway == "" {
			continue
		}
		gw, err := netval.ParseAddr(ip.Gateway)
		if err != nil {
			return nil, fmt.Errorf("pod-network result gateway %s: %w", netval.Quote(ip.Gateway), err)
		}
		is4 := gw.Is4()
		route := func(p string) { def.Routes = append(def.Routes, ovn.PodRoute{Dest: p, NextHop: gw.String()}) }
		for _, s := range clusterSubnets {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() == is4 {
				route(p.String())
			}
		}
		if defRole == rolePrimary {
			for _, s := range in.PodNetwork.ServiceSubnets {
				if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() == is4 {
					route(p.String())
				}
			}
			route(pick(is4, hairpinV4, hairpinV6).String())
			if !requested[is4] {
				def.GatewayIPs = append(def.GatewayIPs, gw.String())
			}
		}
		route(pick(is4, joinSubnetV4, joinSubnetV6).String())
	}
	setLegacy(&def)
	out[defaultNetKey] = def

	for _, a := range in.Attachments {
		if a.NAD.Type != typeSRIOV {
			continue
		}
		key := a.Selection.Namespace + "/" + a.Selection.Name
		role := a.NAD.Role
		if role == "" {
			role = roleSecondary
		}
		pa := ovn.PodNetwork{MACAddress: a.MAC, Role: role}
		for _, gw := range a.Selection.GatewayRequest {
			pa.GatewayIPs = append(pa.GatewayIPs, gw.String())
		}
		if a.Result != nil {
			for _, ip := range a.Result.IPs {
				p, err := netip.ParsePrefix(ip.Address)
				if err != nil {
					return nil, fmt.Errorf("network %s result address %s: %w", key, netval.Quote(ip.Address), err)
				}
				pa.IPAddresses = append(pa.IPAddresses, p.String())
				if role == rolePrimary && ip.Gateway != "" {
					gw, err := netval.ParseAddr(ip.Gateway)
					if err != nil {
						return nil, fmt.Errorf("network %s result gateway %s: %w", key, netval.Quote(ip.Gateway), err)
					}
					for _, s := range in.PodNetwork.ServiceSubnets {
						if sp, err := netip.ParsePrefix(s); err == nil && sp.Addr().Is4() == gw.Is4() {
							pa.Routes = append(pa.Routes, ovn.PodRoute{Dest: sp.String(), NextHop: gw.String()})
						}
					}
					pa.Routes = append(pa.Routes, ovn.PodRoute{Dest: pick(gw.Is4(), udnJoinSubnetV4, udnJoinSubnetV6).String(), NextHop: gw.String()})
					if len(a.Selection.GatewayRequest) == 0 {
						pa.GatewayIPs = append(pa.GatewayIPs, gw.String())
					}
				}
			}
			for _, rt := range a.Result.Routes {
				p, err := netip.ParsePrefix(rt.Dst)
				if err != nil {
					return nil, fmt.Errorf("network %s result route %s: %w", key, netval.Quote(rt.Dst), err)
				}
				if p.Bits() == 0 {
					continue // OVN-K carries default routes as gateway_ips only
				}
				pa.Routes = append(pa.Routes, ovn.PodRoute{Dest: p.Masked().String(), NextHop: rt.GW})
			}
		}
		setLegacy(&pa)
		out[key] = pa
	}
	return out, nil
}

// setLegacy fills the deprecated single-stack fields as MarshalPodAnnotation does: only with one IP.
func setLegacy(pa *ovn.PodNetwork) {
	if len(pa.IPAddresses) == 1 {
		pa.IPAddress = pa.IPAddresses[0]
		if len(pa.GatewayIPs) == 1 {
			pa.GatewayIP = pa.GatewayIPs[0]
		}
	}
}

func pick(is4 bool, v4, v6 netip.Prefix) netip.Prefix {
	if is4 {
		return v4
	}
	return v6
}
