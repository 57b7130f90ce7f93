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
	return renderV1(plans)
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

// MergeNoCloud merges our config for ifaces into the user's NoCloud network-config. It keeps the user's
// version (v1 or v2: cloud-init reads one version per document) and their optional top-level "network:"
// wrapper (stages.py _remove_top_level_network_key); with no user data it renders v1. A user entry that
// configures one of our NICs (same MAC, case-insensitive, or same name) wins and ours for that NIC is left
// out; everything of theirs is re-emitted from the parsed document, unknown keys and comments included.
func MergeNoCloud(user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	return mergeOnce(formats[dataSourceNoCloud], user, ifaces)
}

// renderV1 writes NoCloud network-config v1 for plans alone.
func renderV1(plans []nicPlan) ([]byte, error) {
	config := seqNode()
	for i := range plans {
		config.Content = append(config.Content, v1Physical(&plans[i]))
	}
	root := mapNode()
	set(root, "version", intNode(1))
	set(root, "config", config)
	return nodeJSON(root)
}

// noCloudUser is the user's NoCloud network-config, parsed: the document (re-emitted after the merge),
// the node our entries go into, and the MACs and names of the NICs the user configures.
type noCloudUser struct {
	doc         *yaml.Node
	into        *yaml.Node
	version     noCloudVersion
	mb          *mergeBudget
	macs, names []string
}

// noCloudVersion is what one network-config version means for the merge: where the user's NICs are
// listed (the node ours go into, and the MACs and names theirs configure), and how one of ours is added.
type noCloudVersion struct {
	userNICs func(body *yaml.Node, mb *mergeBudget) (into *yaml.Node, macs, names []string, err error)
	add      func(into *yaml.Node, p *nicPlan) error
}

// noCloudVersions holds the versions cloud-init reads, keyed by the document's "version".
var noCloudVersions = map[string]noCloudVersion{
	"1": {userNICs: v1UserNICs, add: v1Add},
	"2": {userNICs: v2UserNICs, add: v2Add},
}

// parseNoCloud parses the user's network-config (not blank) within the limits and finds the NICs it
// configures; nil, nil when it configures nothing (only comments, or null). Errors name the source.
func parseNoCloud(user []byte) (userNetwork, error) {
	if err := checkYAMLSize(user); err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	doc, err := decodeYAML(user)
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	if doc == nil {
		return nil, nil
	}
	if err := checkYAMLTree(doc); err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	mb := newMergeBudget()
	lookup := mb.lookup
	body := resolve(doc.Content[0])
	if body.Kind == yaml.ScalarNode && body.Tag == "!!null" {
		return nil, nil
	}
	if body.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("noCloud networkData: top level is not a mapping")
	}
	if wrapped := lookup(body, "network"); wrapped != nil {
		body = resolve(wrapped)
		if body == nil || body.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("noCloud networkData: \"network\" is not a mapping")
		}
	}
	if v, ok := scalar(lookup(body, "config")); ok && v == "disabled" {
		return nil, fmt.Errorf("noCloud networkData disables networking (config: disabled): cannot add the interfaces bound to this plugin")
	}
	vn := resolve(lookup(body, "version"))
	var version noCloudVersion
	known := false
	if vn != nil && vn.Kind == yaml.ScalarNode && vn.ShortTag() == "!!int" {
		version, known = noCloudVersions[vn.Value]
	}
	if !known {
		got := "none"
		if v, ok := scalar(vn); ok {
			got = fmt.Sprintf("%q", v)
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

// merge adds ours for the NICs the user does not configure and re-emits the document; once only.
func (u *noCloudUser) merge(plans []nicPlan) ([]byte, error) {
	var err error
	for i := range plans {
		if err == nil && !configuredByUser(&plans[i], u.macs, u.names) {
			err = u.version.add(u.into, &plans[i])
		}
	}
	if err == nil && u.mb.exceeded() {
		err = fmt.Errorf("YAML merge keys (<<) make the merge visit more than %d mappings", MaxMergeExpansion)
	}
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	out, err := encodeYAML(u.doc)
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	return out, nil
}

// collection returns the list or mapping under key in mapping m, creating it (or replacing a null) when absent.
func collection(m *yaml.Node, key string, kind yaml.Kind, tag string, mb *mergeBudget) (*yaml.Node, error) {
	n := resolve(mb.lookup(m, key))
	switch {
	case n == nil:
		n = &yaml.Node{Kind: kind, Tag: tag}
		set(m, key, n)
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		n.Kind, n.Tag, n.Value, n.Style = kind, tag, "", 0
	case n.Kind != kind:
		return nil, fmt.Errorf("%q is not a %s", key, map[yaml.Kind]string{yaml.SequenceNode: "list", yaml.MappingNode: "mapping"}[kind])
	}
	return n, nil
}

// v1UserNICs finds, in a v1 body, the "config" list (made when absent) and the NICs its entries configure.
func v1UserNICs(body *yaml.Node, mb *mergeBudget) (*yaml.Node, []string, []string, error) {
	config, err := collection(body, "config", yaml.SequenceNode, "!!seq", mb)
	if err != nil {
		return nil, nil, nil, err
	}
	macs, names := userNICsV1(config, mb.lookup)
	return config, macs, names, nil
}

func v1Add(config *yaml.Node, p *nicPlan) error {
	config.Content = append(config.Content, v1Physical(p))
	return nil
}

// v2UserNICs treats every mapping-valued top-level key (ethernets, bonds, vlans, bridges, ...) as a map
// of interface IDs: netplan IDs share one namespace, so an ID equal to our name is a clash too. Ours go
// into "ethernets" (made when absent).
func v2UserNICs(body *yaml.Node, mb *mergeBudget) (*yaml.Node, []string, []string, error) {
	macs, names := userNICsV2(body, mb.lookup)
	ethernets, err := collection(body, "ethernets", yaml.MappingNode, "!!map", mb)
	if err != nil {
		return nil, nil, nil, err
	}
	return ethernets, macs, names, nil
}

func v2Add(ethernets *yaml.Node, p *nicPlan) error {
	entry, err := v2Ethernet(p)
	if err != nil {
		return err
	}
	setQuotedKey(ethernets, p.name, entry)
	return nil
}

// lookupFunc is lookup, or a mergeBudget's lookup that shares one budget across a document.
type lookupFunc func(m *yaml.Node, key string) *yaml.Node

// userNICsV1 returns the MACs and names the entries of a v1 "config" list configure.
func userNICsV1(config *yaml.Node, lookup lookupFunc) (macs, names []string) {
	for _, item := range config.Content {
		if mac, ok := scalar(lookup(item, "mac_address")); ok {
			macs = append(macs, mac)
		}
		if name, ok := scalar(lookup(item, "name")); ok {
			names = append(names, name)
		}
	}
	return macs, names
}

// userNICsV2 returns the MACs and names (IDs, set-name, match.name) every mapping-valued top-level
// section of a v2 body configures.
func userNICsV2(body *yaml.Node, lookup lookupFunc) (macs, names []string) {
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
			if name, ok := scalar(lookup(entry, "set-name")); ok {
				names = append(names, name)
			}
			match := lookup(entry, "match")
			if mac, ok := scalar(lookup(match, "macaddress")); ok {
				macs = append(macs, mac)
			}
			if name, ok := scalar(lookup(match, "name")); ok {
				names = append(names, name)
			}
		}
	}
	return macs, names
}
