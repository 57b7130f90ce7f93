package cloudinit

import (
	"encoding/json"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The network_data.json rules in this file exist for Windows guests: cloudbase-init reads only the
// ConfigDrive network_data.json and applies it differently from cloud-init (cloudbase/cloudbase-init):
//   - metadata/services/baseopenstackservice.py _parse_network_data_links: the link "id" becomes the
//     adapter name (the "name" key is ignored); _parse_network_data_networks keeps only networks of type
//     "ipv4" and "ipv6" and reads DNS from the per-network "services" ({"type":"dns","address":...}),
//     never from dns_nameservers or dns_search; _parse_network_data_services reads top-level services.
//   - plugins/common/networkconfig.py: _process_physical_links renames every link's adapter (found by
//     MAC) and sets its MTU before any network is applied; _process_networks then applies the networks
//     in order: each calls osutils set_static_network_config with the network's default route as the
//     gateway and its own DNS servers, or, when it has none, the top-level DNS servers of its family.
//   - osutils/windows.py _set_static_network_config turns DHCP off for the family, deletes every address
//     and route of that family on the adapter, then adds the one address; _set_interface_dns replaces the
//     adapter's server list whenever the list is non-empty.
// So a second network of one family on one link replaces the first, and the last network that sets DNS
// on an adapter decides its servers.

// cloudbasePrimaries returns, per family, the index in p.static of the address that gets the "ipv4" or
// "ipv6" network cloudbase-init applies: the first one whose subnet holds the family's gateway (Windows
// refuses a gateway outside the address's subnet, cloudbase-init #166, and the plugin stops there), else
// the first one. The other addresses of the family get ndStaticType's cloud-init-only type.
func cloudbasePrimaries(p *nicPlan) map[model.Family]int {
	primary := map[model.Family]int{}
	for j, a := range p.static {
		f := model.FamilyOf(a.Addr())
		cur, seen := primary[f]
		switch gw := p.gateway(f); {
		case !seen:
			primary[f] = j
		case gw.IsValid() && !p.static[cur].Masked().Contains(gw) && a.Masked().Contains(gw):
			primary[f] = j
		}
	}
	return primary
}

// ndStaticType is the network type of a static address. The address cloudbase-init applies is the
// OpenStack "ipv4"/"ipv6"; any further address of the family is "static"/"static6", which cloud-init
// reads as "ipv4"/"ipv6" (openstack.py convert_net_json: a static subnet; the subnet flags only guard
// duplicate default routes, which these networks never carry) and cloudbase-init skips, so it does not
// replace the address it applied.
func ndStaticType(f model.Family, primary bool) string {
	switch {
	case primary && f == model.IPv4:
		return "ipv4"
	case primary:
		return "ipv6"
	case f == model.IPv4:
		return "static"
	default:
		return "static6"
	}
}

// ndDNSNetwork is the index of the network that carries a NIC's DNS: its first network cloudbase-init
// applies ("ipv4"/"ipv6"), else its first.
func ndDNSNetwork(networks []ndNetwork) int {
	for i, n := range networks {
		if n.Type == "ipv4" || n.Type == "ipv6" {
			return i
		}
	}
	return 0
}

// hasDNSService reports whether the user's top-level services include a "dns" entry. cloudbase-init gives
// those servers to every network that has no services of its own (networkconfig.py _process_networks).
func hasDNSService(services []json.RawMessage) bool {
	for _, raw := range services {
		var s struct {
			Type *string `json:"type"`
		}
		if json.Unmarshal(raw, &s) == nil && s.Type != nil && *s.Type == "dns" {
			return true
		}
	}
	return false
}

// spreadDNSServices copies each NIC's DNS services onto its other "ipv4"/"ipv6" network. Needed only when
// the user's data has top-level DNS services: cloudbase-init would apply those to that network of ours,
// after our list, and replace it. Only "services" is copied: cloud-init 22.4.2 renders the same; newer
// cloud-init lists the servers on both subnets of the interface, which is where they apply anyway.
func spreadDNSServices(parts []ndPart) {
	for i := range parts {
		nets := parts[i].networks
		services := nets[ndDNSNetwork(nets)].Services
		if len(services) == 0 {
			continue
		}
		for j := range nets {
			if (nets[j].Type == "ipv4" || nets[j].Type == "ipv6") && len(nets[j].Services) == 0 {
				nets[j].Services = services
			}
		}
	}
}

// oursFirst puts our entries before the user's. cloudbase-init applies links, then networks, in list
// order, and one failure ends the plugin: a user link whose MAC is not in the guest (cloudbase-init #47),
// a user gateway outside its subnet (#166). Ours first, our NICs are configured before such an entry
// stops it. cloud-init matches links by MAC or name and networks by link id: the order changes nothing.
func oursFirst(ours, theirs []json.RawMessage) []json.RawMessage {
	if len(ours) == 0 {
		return theirs
	}
	return append(ours, theirs...)
}
