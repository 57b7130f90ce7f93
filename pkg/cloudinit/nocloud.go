package cloudinit

import (
	"fmt"
	"net/netip"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// RenderNetworkConfigV1 renders NoCloud network-config version 1 for ifaces, as JSON (which is YAML). v1 is our default: its
// per-subnet gateway and routes render dual-stack correctly with every cloud-init 22.4.2 renderer.
func RenderNetworkConfigV1(ifaces []model.BoundInterface) ([]byte, error) {
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, err
	}
	config := seqNode()
	for i := range plans {
		config.Content = append(config.Content, v1Physical(&plans[i]))
	}
	root := mapNode()
	set(root, "version", intNode(1))
	set(root, "config", config)
	return nodeJSON(root)
}

func addrSeq(as []netip.Addr) *yaml.Node {
	s := seqNode()
	for _, a := range as {
		s.Content = append(s.Content, strNode(a.String()))
	}
	return s
}

func strSeq(ss []string) *yaml.Node {
	s := seqNode()
	for _, v := range ss {
		s.Content = append(s.Content, strNode(v))
	}
	return s
}

// v1Physical builds one v1 "physical" entry. name plus mac_address makes cloud-init rename the NIC to name
// (apply_network_config_names). Gateways and routes go on the first subnet of their own family and DNS on
// the first subnet: the network-manager renderer files routes under the subnet's family
// (network_manager.py render_interface).
func v1Physical(p *nicPlan) *yaml.Node {
	phy := mapNode()
	set(phy, "type", strNode("physical"))
	set(phy, "name", strNode(p.name))
	set(phy, "mac_address", strNode(p.mac.String()))
	if p.mtu > 0 {
		set(phy, "mtu", intNode(p.mtu))
	}
	subnets := seqNode()
	firstOf := map[model.Family]*yaml.Node{}
	if p.dhcp4 {
		s := mapNode()
		set(s, "type", strNode("dhcp"))
		subnets.Content = append(subnets.Content, s)
		firstOf[model.IPv4] = s
	}
	if p.dhcp6 {
		s := mapNode()
		set(s, "type", strNode("dhcp6"))
		subnets.Content = append(subnets.Content, s)
		firstOf[model.IPv6] = s
	}
	for _, a := range p.static {
		s := mapNode()
		set(s, "type", strNode("static"))
		set(s, "address", strNode(a.String()))
		f := model.FamilyOf(a.Addr())
		if firstOf[f] == nil {
			firstOf[f] = s
			if gw := p.gateway(f); gw.IsValid() {
				set(s, "gateway", strNode(gw.String()))
			}
		}
		subnets.Content = append(subnets.Content, s)
	}
	if len(subnets.Content) > 0 {
		if len(p.nameservers) > 0 {
			set(subnets.Content[0], "dns_nameservers", addrSeq(p.nameservers))
		}
		if len(p.search) > 0 {
			set(subnets.Content[0], "dns_search", strSeq(p.search))
		}
	}
	for _, f := range []model.Family{model.IPv4, model.IPv6} {
		routes := p.routesOf(f)
		if len(routes) == 0 {
			continue
		}
		seq := seqNode()
		for _, r := range routes {
			rn := mapNode()
			set(rn, "network", strNode(r.Dest.Addr().String()))
			set(rn, "prefix", intNode(r.Dest.Bits()))
			set(rn, "gateway", strNode(routeGateway(r)))
			seq.Content = append(seq.Content, rn)
		}
		set(firstOf[f], "routes", seq) // planNIC guarantees a subnet of the route's family
	}
	if len(subnets.Content) == 0 {
		// No addresses (layer2): a "manual" subnet makes the eni renderer mark the NIC "auto" so ifupdown
		// brings the link up; without any subnet it writes no "auto" line. networkd, sysconfig and
		// network-manager render it as they render a NIC without subnets.
		s := mapNode()
		set(s, "type", strNode("manual"))
		subnets.Content = append(subnets.Content, s)
	}
	set(phy, "subnets", subnets)
	return phy
}

// v2Ethernet builds one v2 ethernets entry, keyed by the guest name. Only forms cloud-init 22.4.2 renders
// right everywhere: gateway4/gateway6 for default routes (never "to: default" or "::/0"), no route metric.
// 22.4.2 hangs all v2 routes and nameservers on the first subnet it derives (dhcp4, dhcp6, then addresses:
// network_state.py _v2_to_v1_ipcfg), and network-manager files routes under that subnet's family, so the
// addresses are ordered to put the routes' family first; routes of both families cannot be expressed.
func v2Ethernet(p *nicPlan) (*yaml.Node, error) {
	e := mapNode()
	match := mapNode()
	set(match, "macaddress", strNode(p.mac.String()))
	set(e, "match", match)
	set(e, "set-name", strNode(p.name))
	if p.mtu > 0 {
		set(e, "mtu", intNode(p.mtu))
	}
	if p.dhcp4 {
		set(e, "dhcp4", boolNode(true))
	}
	if p.dhcp6 {
		set(e, "dhcp6", boolNode(true))
	}
	addresses := p.static
	if len(p.routes) > 0 {
		rf := model.FamilyOf(p.routes[0].Dest.Addr())
		if len(p.routesOf(rf)) != len(p.routes) {
			return nil, fmt.Errorf("cloud-init v2 config for interface %q: routes of both IP families cannot be rendered correctly by cloud-init 22.4.2 from v2 (use network-config v1)", p.iface)
		}
		switch {
		case p.dhcp4 || p.dhcp6:
			first := model.IPv6
			if p.dhcp4 {
				first = model.IPv4
			}
			if rf != first {
				return nil, fmt.Errorf("cloud-init v2 config for interface %q: IPv%d routes on a NIC whose first subnet is IPv%d DHCP cannot be rendered correctly by cloud-init 22.4.2 from v2 (use network-config v1)", p.iface, rf, first)
			}
		default:
			addresses = append(p.staticOf(rf), p.staticOf(otherFamily(rf))...)
		}
	}
	if len(addresses) > 0 {
		seq := seqNode()
		for _, a := range addresses {
			seq.Content = append(seq.Content, strNode(a.String()))
		}
		set(e, "addresses", seq)
	}
	if p.gateway4.IsValid() {
		set(e, "gateway4", strNode(p.gateway4.String()))
	}
	if p.gateway6.IsValid() {
		set(e, "gateway6", strNode(p.gateway6.String()))
	}
	if len(p.nameservers) > 0 || len(p.search) > 0 {
		ns := mapNode()
		if len(p.nameservers) > 0 {
			set(ns, "addresses", addrSeq(p.nameservers))
		}
		if len(p.search) > 0 {
			set(ns, "search", strSeq(p.search))
		}
		set(e, "nameservers", ns)
	}
	if len(p.routes) > 0 {
		seq := seqNode()
		for _, r := range p.routes {
			rn := mapNode()
			set(rn, "to", strNode(r.Dest.String()))
			set(rn, "via", strNode(routeGateway(r)))
			seq.Content = append(seq.Content, rn)
		}
		set(e, "routes", seq)
	}
	return e, nil
}

func otherFamily(f model.Family) model.Family {
	if f == model.IPv4 {
		return model.IPv6
	}
	return model.IPv4
}
