package cloudinit

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// RenderNetworkConfigV1 renders NoCloud network-config version 1 for ifaces, as JSON (which is YAML). v1 is
// our default: its per-subnet gateway and routes render dual-stack correctly with every 22.4.2 renderer.
func RenderNetworkConfigV1(ifaces []model.BoundInterface) ([]byte, error) {
	return mergeOnce(formats[dataSourceNoCloud], nil, ifaces)
}

// NoCloud network-config as we write it (cloud-init's "Networking Config Version 1" and "Version 2" docs):
// alone through the json tags, merged into the user's document through the yaml tags (yamlNode).
type (
	v1Config struct {
		Version int          `json:"version"`
		Config  []v1Physical `json:"config"`
	}
	v1Physical struct {
		Type       string     `json:"type" yaml:"type"`
		Name       string     `json:"name" yaml:"name"`
		MACAddress string     `json:"mac_address" yaml:"mac_address"`
		MTU        int        `json:"mtu,omitempty" yaml:"mtu,omitempty"`
		Subnets    []v1Subnet `json:"subnets" yaml:"subnets"`
	}
	v1Subnet struct {
		Type           string    `json:"type" yaml:"type"`
		Address        string    `json:"address,omitempty" yaml:"address,omitempty"`
		Gateway        string    `json:"gateway,omitempty" yaml:"gateway,omitempty"`
		DNSNameservers []string  `json:"dns_nameservers,omitempty" yaml:"dns_nameservers,omitempty"`
		DNSSearch      []string  `json:"dns_search,omitempty" yaml:"dns_search,omitempty"`
		Routes         []v1Route `json:"routes,omitempty" yaml:"routes,omitempty"`
	}
	v1Route struct {
		Network string `json:"network" yaml:"network"`
		Prefix  int    `json:"prefix" yaml:"prefix"`
		Gateway string `json:"gateway" yaml:"gateway"`
	}
	v2Ethernet struct {
		Match       v2Match        `json:"match" yaml:"match"`
		SetName     string         `json:"set-name" yaml:"set-name"`
		MTU         int            `json:"mtu,omitempty" yaml:"mtu,omitempty"`
		DHCP4       bool           `json:"dhcp4,omitempty" yaml:"dhcp4,omitempty"`
		DHCP6       bool           `json:"dhcp6,omitempty" yaml:"dhcp6,omitempty"`
		Addresses   []string       `json:"addresses,omitempty" yaml:"addresses,omitempty"`
		Gateway4    string         `json:"gateway4,omitempty" yaml:"gateway4,omitempty"`
		Gateway6    string         `json:"gateway6,omitempty" yaml:"gateway6,omitempty"`
		Nameservers *v2Nameservers `json:"nameservers,omitempty" yaml:"nameservers,omitempty"`
		Routes      []v2Route      `json:"routes,omitempty" yaml:"routes,omitempty"`
	}
	v2Match struct {
		MACAddress string `json:"macaddress" yaml:"macaddress"`
	}
	v2Nameservers struct {
		Addresses []string `json:"addresses,omitempty" yaml:"addresses,omitempty"`
		Search    []string `json:"search,omitempty" yaml:"search,omitempty"`
	}
	v2Route struct {
		To  string `json:"to" yaml:"to"`
		Via string `json:"via" yaml:"via"`
	}
)

func addrStrings(as []netip.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// v1PhysicalOf is one v1 "physical" entry (name plus mac_address makes cloud-init rename the NIC). Gateways
// and routes go on the first subnet of their own family, as network-manager files routes under the
// subnet's family (network_manager.py render_interface); DNS on the first subnet.
func v1PhysicalOf(p *nicPlan) v1Physical {
	phy := v1Physical{Type: "physical", Name: p.name, MACAddress: p.mac.String(), MTU: p.mtu}
	firstOf := map[model.Family]int{} // index in phy.Subnets
	if p.dhcp4 {
		firstOf[model.IPv4] = len(phy.Subnets)
		phy.Subnets = append(phy.Subnets, v1Subnet{Type: "dhcp"})
	}
	if p.dhcp6 {
		firstOf[model.IPv6] = len(phy.Subnets)
		phy.Subnets = append(phy.Subnets, v1Subnet{Type: "dhcp6"})
	}
	for _, a := range p.static {
		s := v1Subnet{Type: "static", Address: a.String()}
		f := model.FamilyOf(a.Addr())
		if _, seen := firstOf[f]; !seen {
			firstOf[f] = len(phy.Subnets)
			if gw := p.gateway(f); gw.IsValid() {
				s.Gateway = gw.String()
			}
		}
		phy.Subnets = append(phy.Subnets, s)
	}
	if len(phy.Subnets) == 0 {
		// No addresses (layer2): a "manual" subnet makes the eni renderer mark the NIC "auto", so ifupdown
		// brings the link up; the other renderers render it as a NIC without subnets.
		phy.Subnets = []v1Subnet{{Type: "manual"}}
		return phy
	}
	phy.Subnets[0].DNSNameservers, phy.Subnets[0].DNSSearch = addrStrings(p.nameservers), p.search
	for _, r := range p.routes {
		s := &phy.Subnets[firstOf[model.FamilyOf(r.Dest.Addr())]] // planNIC guarantees a subnet of the route's family
		s.Routes = append(s.Routes, v1Route{Network: r.Dest.Addr().String(), Prefix: r.Dest.Bits(), Gateway: routeGateway(r)})
	}
	return phy
}

// v2EthernetOf is one v2 ethernets entry, in forms 22.4.2 renders right everywhere: gateway4/gateway6 for
// default routes (never "to: default" or "::/0"), no route metric. 22.4.2 hangs all v2 routes on the first
// subnet it derives (dhcp4, dhcp6, then addresses: network_state.py _v2_to_v1_ipcfg), and network-manager
// files them under that subnet's family: the routes' family comes first; both families cannot be expressed.
func v2EthernetOf(p *nicPlan) (v2Ethernet, error) {
	e := v2Ethernet{Match: v2Match{MACAddress: p.mac.String()}, SetName: p.name, MTU: p.mtu, DHCP4: p.dhcp4, DHCP6: p.dhcp6}
	addresses := p.static
	if len(p.routes) > 0 {
		rf := model.FamilyOf(p.routes[0].Dest.Addr())
		if slices.ContainsFunc(p.routes, func(r model.Route) bool { return model.FamilyOf(r.Dest.Addr()) != rf }) {
			return e, fmt.Errorf("cloud-init v2 config for interface %q: routes of both IP families cannot be rendered correctly by cloud-init 22.4.2 from v2 (use network-config v1)", p.iface)
		}
		switch {
		case p.dhcp4 || p.dhcp6:
			first := model.IPv6
			if p.dhcp4 {
				first = model.IPv4
			}
			if rf != first {
				return e, fmt.Errorf("cloud-init v2 config for interface %q: IPv%d routes on a NIC whose first subnet is IPv%d DHCP cannot be rendered correctly by cloud-init 22.4.2 from v2 (use network-config v1)", p.iface, rf, first)
			}
		default: // the routes' family first
			var other []netip.Prefix
			addresses = nil
			for _, a := range p.static {
				if model.FamilyOf(a.Addr()) == rf {
					addresses = append(addresses, a)
				} else {
					other = append(other, a)
				}
			}
			addresses = append(addresses, other...)
		}
	}
	for _, a := range addresses {
		e.Addresses = append(e.Addresses, a.String())
	}
	if p.gateway4.IsValid() {
		e.Gateway4 = p.gateway4.String()
	}
	if p.gateway6.IsValid() {
		e.Gateway6 = p.gateway6.String()
	}
	if len(p.nameservers) > 0 || len(p.search) > 0 {
		e.Nameservers = &v2Nameservers{Addresses: addrStrings(p.nameservers), Search: p.search}
	}
	for _, r := range p.routes {
		e.Routes = append(e.Routes, v2Route{To: r.Dest.String(), Via: routeGateway(r)})
	}
	return e, nil
}

// MergeNoCloud merges our config for ifaces into the user's NoCloud network-config, in the user's version
// (cloud-init reads one per document), under their "network:" wrapper if any; with no user data it renders
// v1. A user entry that configures one of our NICs (same MAC, case-insensitive, or same name) wins; all of
// theirs is re-emitted from the parsed document, unknown keys and comments included.
func MergeNoCloud(user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	return mergeOnce(formats[dataSourceNoCloud], user, ifaces)
}

// renderV1 writes NoCloud network-config v1 for plans alone.
func renderV1(plans []nicPlan) ([]byte, error) {
	c := v1Config{Version: 1, Config: make([]v1Physical, 0, len(plans))}
	for i := range plans {
		c.Config = append(c.Config, v1PhysicalOf(&plans[i]))
	}
	return marshalJSON(c, true)
}

// noCloudUser is the user's NoCloud network-config, parsed: the document, the node our entries go into,
// and the MACs and names of the NICs the user configures.
type noCloudUser struct {
	doc, into   *yaml.Node
	version     noCloudVersion
	mb          *mergeBudget
	macs, names []string
}

// noCloudVersion is what one network-config version means for the merge: where the user's NICs are
// listed, and how one of ours is added.
type noCloudVersion struct {
	userNICs func(body *yaml.Node, mb *mergeBudget) (into *yaml.Node, macs, names []string, err error)
	add      func(into *yaml.Node, p *nicPlan) error
}

// noCloudVersions holds the versions cloud-init reads, keyed by the document's "version".
var noCloudVersions = map[string]noCloudVersion{
	"1": {userNICs: v1UserNICs, add: v1Add},
	"2": {userNICs: v2UserNICs, add: v2Add},
}

// parseNoCloud parses the user's network-config (not blank) within the limits; nil, nil when it
// configures nothing (only comments, or null).
func parseNoCloud(user []byte) (userNetwork, error) {
	doc, err := decodeYAMLWithinLimits(user)
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	if doc == nil {
		return nil, nil
	}
	mb := newMergeBudget()
	body := resolve(doc.Content[0])
	if body.Kind == yaml.ScalarNode && body.Tag == "!!null" {
		return nil, nil
	}
	if body.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("noCloud networkData: top level is not a mapping")
	}
	if wrapped := mb.lookup(body, "network"); wrapped != nil {
		if body = resolve(wrapped); body == nil || body.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("noCloud networkData: \"network\" is not a mapping")
		}
	}
	if v, ok := scalar(mb.lookup(body, "config")); ok && v == "disabled" {
		return nil, fmt.Errorf("noCloud networkData disables networking (config: disabled): cannot add the interfaces bound to this plugin")
	}
	vn := resolve(mb.lookup(body, "version"))
	v, isScalar := scalar(vn)
	version, known := noCloudVersions[v]
	if !known || vn.ShortTag() != "!!int" {
		got := "none"
		if isScalar {
			got = strconv.Quote(v)
		}
		return nil, fmt.Errorf("noCloud networkData: version must be 1 or 2, got %s", got)
	}
	u := &noCloudUser{doc: doc, version: version, mb: mb}
	if u.into, u.macs, u.names, err = version.userNICs(body, mb); err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	return u, nil
}

func (u *noCloudUser) keys() (macs, names []string) { return u.macs, u.names }

// merge adds ours and re-emits the document; once only.
func (u *noCloudUser) merge(ours []nicPlan) (out []byte, err error) {
	for i := 0; i < len(ours) && err == nil; i++ {
		err = u.version.add(u.into, &ours[i])
	}
	if err == nil && u.mb.exceeded() {
		err = fmt.Errorf("YAML merge keys (<<) make the merge visit more than %d mappings", MaxMergeExpansion)
	}
	if err == nil {
		out, err = encodeYAML(u.doc)
	}
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	return out, nil
}

// collection returns the list or mapping under key in mapping m, made when absent or null.
func collection(m *yaml.Node, key string, kind yaml.Kind, tag string, mb *mergeBudget) (*yaml.Node, error) {
	n := resolve(mb.lookup(m, key))
	switch {
	case n == nil:
		n = &yaml.Node{Kind: kind, Tag: tag}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n) // our key: plain
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		n.Kind, n.Tag, n.Value, n.Style = kind, tag, "", 0
	case n.Kind != kind:
		return nil, fmt.Errorf("%q is not a %s", key, map[yaml.Kind]string{yaml.SequenceNode: "list", yaml.MappingNode: "mapping"}[kind])
	}
	return n, nil
}

// v1UserNICs finds, in a v1 body, the "config" list and the MACs and names its entries configure.
func v1UserNICs(body *yaml.Node, mb *mergeBudget) (config *yaml.Node, macs, names []string, err error) {
	if config, err = collection(body, "config", yaml.SequenceNode, "!!seq", mb); err != nil {
		return nil, nil, nil, err
	}
	for _, item := range config.Content {
		if mac, ok := scalar(mb.lookup(item, "mac_address")); ok {
			macs = append(macs, mac)
		}
		if name, ok := scalar(mb.lookup(item, "name")); ok {
			names = append(names, name)
		}
	}
	return config, macs, names, nil
}

func v1Add(config *yaml.Node, p *nicPlan) error {
	entry, err := yamlNode(v1PhysicalOf(p))
	if err != nil {
		return err
	}
	config.Content = append(config.Content, entry)
	return nil
}

// v2UserNICs finds the MACs and names (IDs, set-name, match.name) every mapping-valued top-level section
// of a v2 body configures (ethernets, bonds, vlans, bridges, ...: netplan IDs share one namespace, so an
// ID equal to our name is a clash too), and "ethernets" (made when absent), where ours go.
func v2UserNICs(body *yaml.Node, mb *mergeBudget) (ethernets *yaml.Node, macs, names []string, err error) {
	for i := 0; i+1 < len(body.Content); i += 2 {
		section := resolve(body.Content[i+1])
		if section == nil || section.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(section.Content); j += 2 {
			if id, ok := scalar(section.Content[j]); ok {
				names = append(names, id)
			}
			entry := section.Content[j+1]
			if name, ok := scalar(mb.lookup(entry, "set-name")); ok {
				names = append(names, name)
			}
			match := mb.lookup(entry, "match")
			if mac, ok := scalar(mb.lookup(match, "macaddress")); ok {
				macs = append(macs, mac)
			}
			if name, ok := scalar(mb.lookup(match, "name")); ok {
				names = append(names, name)
			}
		}
	}
	if ethernets, err = collection(body, "ethernets", yaml.MappingNode, "!!map", mb); err != nil {
		return nil, nil, nil, err
	}
	return ethernets, macs, names, nil
}

func v2Add(ethernets *yaml.Node, p *nicPlan) error {
	e, err := v2EthernetOf(p)
	if err != nil {
		return err
	}
	entry, err := yamlNode(e)
	if err != nil {
		return err
	}
	ethernets.Content = append(ethernets.Content, quoted(p.name), entry) // the ID comes from data: quoted
	return nil
}
