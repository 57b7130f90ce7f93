package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// OpenStack network_data.json as cloud-init reads it (sources/helpers/openstack.py convert_net_json).
// Links carry "name" (a cloud-init extension), for the guest name NoCloud v1 gives too. Default routes
// go to network "::" with netmask "::", the IPv6 form 22.4.2 renders as ::/0 (IPv4 alike). cloud-init
// copies dns_nameservers and dns_search onto the subnet; "services" cannot carry search domains.
type ndLink struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	MAC  string `json:"ethernet_mac_address"`
	MTU  int    `json:"mtu,omitempty"`
	Name string `json:"name"`
}

type ndRoute struct {
	Network string `json:"network"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
}

type ndNetwork struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	Link           string    `json:"link"`
	IPAddress      string    `json:"ip_address,omitempty"`
	Netmask        string    `json:"netmask,omitempty"`
	Routes         []ndRoute `json:"routes,omitempty"`
	DNSNameservers []string  `json:"dns_nameservers,omitempty"`
	DNSSearch      []string  `json:"dns_search,omitempty"`
	// Services repeats DNSNameservers in the form cloudbase-init reads (see cloudbase.go).
	Services []ndService `json:"services,omitempty"`
}

// ndService is an OpenStack network service; only "dns" is emitted.
type ndService struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// ndPart is our contribution for one NIC.
type ndPart struct {
	link     ndLink
	networks []ndNetwork
}

func netmask(p netip.Prefix) string {
	a, _ := netip.AddrFromSlice(net.CIDRMask(p.Bits(), p.Addr().BitLen()))
	return a.String()
}

// ndParts builds our links and networks, with ids unique against those taken by the user's data, so
// that we never capture the user's link references; case-insensitively, as cloudbase-init names the
// Windows adapter after the link id.
func ndParts(plans []nicPlan, taken func(string) bool) []ndPart {
	used := map[string]bool{}
	unique := func(base string) string {
		id := base
		for i := 1; taken(id) || used[strings.ToLower(id)]; i++ {
			id = fmt.Sprintf("%s-%d", base, i)
		}
		used[strings.ToLower(id)] = true
		return id
	}
	parts := make([]ndPart, 0, len(plans))
	for i := range plans {
		p := &plans[i]
		part := ndPart{link: ndLink{ID: unique(p.name), Type: "phy", MAC: p.mac.String(), MTU: p.mtu, Name: p.name}}
		// routeTo is, per family, the network that carries the routes: the DHCP network, or the static
		// network cloudbase-init applies (cloudbasePrimaries).
		routeTo := map[model.Family]int{}
		add := func(f model.Family, n ndNetwork, carriesRoutes bool) {
			n.Link = part.link.ID
			if carriesRoutes {
				routeTo[f] = len(part.networks)
			}
			part.networks = append(part.networks, n)
		}
		if p.dhcp4 {
			add(model.IPv4, ndNetwork{ID: unique(p.name + "-ipv4-dhcp"), Type: "ipv4_dhcp"}, true)
		}
		if p.dhcp6 {
			add(model.IPv6, ndNetwork{ID: unique(p.name + "-ipv6-dhcp"), Type: "ipv6_dhcp"}, true)
		}
		primary := cloudbasePrimaries(p)
		for j, a := range p.static {
			f := model.FamilyOf(a.Addr())
			isPrimary := primary[f] == j
			n := ndNetwork{
				ID:        unique(fmt.Sprintf("%s-ipv%d-%d", p.name, f, j)),
				Type:      ndStaticType(f, isPrimary),
				IPAddress: a.Addr().String(),
				Netmask:   netmask(a),
			}
			if gw := p.gateway(f); isPrimary && gw.IsValid() {
				n.Routes = append(n.Routes, ndRoute{Network: unspecified(f), Netmask: unspecified(f), Gateway: gw.String()})
			}
			add(f, n, isPrimary)
		}
		for _, r := range p.routes {
			n := &part.networks[routeTo[model.FamilyOf(r.Dest.Addr())]] // planNIC guarantees a network of the route's family
			n.Routes = append(n.Routes, ndRoute{Network: r.Dest.Addr().String(), Netmask: netmask(r.Dest), Gateway: routeGateway(r)})
		}
		if len(part.networks) == 0 {
			// Layer2: cloud-init passes an unknown network type through as the subnet type, and a "manual"
			// subnet is what makes the eni renderer bring the link up (see v1Physical).
			part.networks = append(part.networks, ndNetwork{ID: unique(p.name + "-manual"), Type: "manual", Link: part.link.ID})
		} else {
			dns := &part.networks[ndDNSNetwork(part.networks)]
			// Services lists every server of the NIC, both families, on one network: split by family over
			// two networks, cloudbase-init would let the second network's list replace the first's.
			for _, ns := range p.nameservers {
				dns.DNSNameservers = append(dns.DNSNameservers, ns.String())
				dns.Services = append(dns.Services, ndService{Type: "dns", Address: ns.String()})
			}
			dns.DNSSearch = p.search
		}
		parts = append(parts, part)
	}
	return parts
}

// MergeNetworkDataJSON adds our links and networks to the user's network_data.json, before theirs (see
// oursFirst). A user link that configures one of our NICs (configuredByUser) wins. Everything of theirs
// is kept as raw JSON values, in their order, never re-typed.
func MergeNetworkDataJSON(user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	return mergeOnce(formats[dataSourceConfigDrive], user, ifaces)
}

// networkDataJSON is the user's network_data.json, parsed: the top-level object, its three lists as raw
// values, the MACs and names of the user's links, and every id (lower case), which ours must not take.
type networkDataJSON struct {
	top                       map[string]json.RawMessage
	links, networks, services []json.RawMessage
	macs, names               []string
	ids                       map[string]bool
}

// parseNetworkDataJSON parses the user's network_data.json (not blank) within the limits.
func parseNetworkDataJSON(user []byte) (userNetwork, error) {
	u := &networkDataJSON{top: map[string]json.RawMessage{}, ids: map[string]bool{}}
	if err := checkJSONLimits(user); err != nil {
		return nil, fmt.Errorf("configDrive networkData (network_data.json): %w", err)
	}
	if err := json.Unmarshal(user, &u.top); err != nil {
		return nil, fmt.Errorf("configDrive networkData (network_data.json): not a JSON object: %w", err)
	}
	if u.top == nil { // the JSON literal null
		u.top = map[string]json.RawMessage{}
	}
	for key, dst := range map[string]*[]json.RawMessage{"links": &u.links, "networks": &u.networks, "services": &u.services} {
		if raw, ok := u.top[key]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("configDrive networkData (network_data.json): %q is not a list: %w", key, err)
			}
		}
	}
	for _, raw := range u.links {
		var l struct {
			ID   json.RawMessage `json:"id"`
			MAC  *string         `json:"ethernet_mac_address"`
			Name *string         `json:"name"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			continue // kept untouched: cloud-init would not read it as one of our NICs either
		}
		if l.MAC != nil {
			u.macs = append(u.macs, *l.MAC)
		}
		if l.Name != nil {
			u.names = append(u.names, *l.Name)
		}
		var id string
		if json.Unmarshal(l.ID, &id) == nil {
			u.ids[strings.ToLower(id)] = true
		}
	}
	for _, raw := range u.networks {
		var n struct {
			ID json.RawMessage `json:"id"`
		}
		var id string
		if json.Unmarshal(raw, &n) == nil && json.Unmarshal(n.ID, &id) == nil {
			u.ids[strings.ToLower(id)] = true
		}
	}
	return u, nil
}

// renderConfigDrive writes network_data.json for plans alone.
func renderConfigDrive(plans []nicPlan) ([]byte, error) {
	return (&networkDataJSON{top: map[string]json.RawMessage{}}).merge(plans)
}

func (u *networkDataJSON) keys() (macs, names []string) { return u.macs, u.names }

// merge writes ours, then theirs.
func (u *networkDataJSON) merge(ours []nicPlan) ([]byte, error) {
	parts := ndParts(ours, func(id string) bool { return u.ids[strings.ToLower(id)] })
	if hasDNSService(u.services) {
		spreadDNSServices(parts)
	}
	var ourLinks, ourNetworks []json.RawMessage
	for _, part := range parts {
		l, err := json.Marshal(part.link)
		if err != nil {
			return nil, fmt.Errorf("encoding network_data.json link %q: %w", part.link.ID, err)
		}
		ourLinks = append(ourLinks, l)
		for _, n := range part.networks {
			b, err := json.Marshal(n)
			if err != nil {
				return nil, fmt.Errorf("encoding network_data.json network %q: %w", n.ID, err)
			}
			ourNetworks = append(ourNetworks, b)
		}
	}
	links, networks := oursFirst(ourLinks, u.links), oursFirst(ourNetworks, u.networks)
	lists := map[string][]json.RawMessage{"links": links, "networks": networks, "services": u.services}
	out, err := writeNetworkData(u.top, lists, map[string]int{"links": len(ourLinks), "networks": len(ourNetworks)})
	if err != nil {
		return nil, fmt.Errorf("encoding network_data.json: %w", err)
	}
	return out, nil
}

// configuredByUser reports whether a user entry with one of these MACs (compared case-insensitively, as
// cloud-init does) or names configures our NIC.
func configuredByUser(p *nicPlan, macs, names []string) bool {
	mac := p.mac.String()
	return slices.ContainsFunc(macs, func(m string) bool { return strings.EqualFold(m, mac) }) || slices.Contains(names, p.name)
}

// writeNetworkData writes network_data.json: top-level keys sorted, one list entry per line, our
// entries indented, the user's values compacted as they came (indenting a value nested d deep would grow
// output and memory with the square of d). lists replace the top-level keys they name; the first
// ours[key] entries of a list are ours. It is not json.Encoder (see marshalJSON), which allocates three
// times the output, where this fills one buffer sized in advance
// (TestMergeNetworkDataJSON_LargestLegalInput_BoundedAllocation).
func writeNetworkData(top map[string]json.RawMessage, lists map[string][]json.RawMessage, ours map[string]int) ([]byte, error) {
	keys := make([]string, 0, len(top)+len(lists))
	size := 16
	for k, v := range top {
		if _, ok := lists[k]; !ok {
			keys = append(keys, k)
			size += len(k) + len(v) + 8
		}
	}
	for k, l := range lists {
		keys = append(keys, k)
		for _, v := range l {
			size += len(v) + 8
		}
	}
	sort.Strings(keys)
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n  ")
		if err := writeJSONString(buf, k); err != nil {
			return nil, err
		}
		buf.WriteString(": ")
		if list, isList := lists[k]; isList {
			if err := writeList(buf, k, list, ours[k]); err != nil {
				return nil, err
			}
		} else if err := json.Compact(buf, top[k]); err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
	}
	if len(keys) > 0 {
		buf.WriteByte('\n')
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// writeList writes the list of top-level key k one entry per line, the first ours entries indented.
func writeList(buf *bytes.Buffer, k string, list []json.RawMessage, ours int) error {
	if len(list) == 0 {
		buf.WriteString("[]")
		return nil
	}
	buf.WriteByte('[')
	for j, v := range list {
		if j > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n    ")
		var err error
		if j < ours {
			err = json.Indent(buf, v, "    ", "  ") // ours: a few levels deep
		} else {
			err = json.Compact(buf, v)
		}
		if err != nil {
			return fmt.Errorf("%q entry %d: %w", k, j, err)
		}
	}
	buf.WriteString("\n  ]")
	return nil
}

func writeJSONString(buf *bytes.Buffer, s string) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
	return nil
}
