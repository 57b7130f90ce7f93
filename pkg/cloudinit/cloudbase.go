package cloudinit

import (
	"encoding/json"
	"slices"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The network_data.json rules in this file exist for Windows guests: cloudbase-init reads only the
// ConfigDrive network_data.json and applies it differently from cloud-init (cloudbase/cloudbase-init):
//   - metadata/services/baseopenstackservice.py: the link "id" becomes the adapter name ("name" is
//     ignored); only networks of type "ipv4" and "ipv6" are kept, with DNS from their "services"
//     ({"type":"dns","address":...}), never from dns_nameservers or dns_search.
//   - plugins/common/networkconfig.py: every link's adapter (found by MAC) is renamed and gets its MTU
//     before any network is applied; then each network, in order, with its default route as the gateway
//     and its own DNS servers, or, when it has none, the top-level DNS servers of its family.
//   - osutils/windows.py _set_static_network_config deletes every address and route of the family on the
//     adapter, then adds the one address; _set_interface_dns replaces the adapter's server list.
// So a second network of one family on one link replaces the first, and the last network that sets DNS
// on an adapter decides its servers.

// cloudbasePrimaries returns, per family, the index in p.static of the address that gets the network
// cloudbase-init applies: the first one whose subnet holds the family's gateway (Windows refuses a
// gateway outside the address's subnet, cloudbase-init #166), else the first one.
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
	return max(0, slices.IndexFunc(networks, func(n ndNetwork) bool { return n.Type == "ipv4" || n.Type == "ipv6" }))
}

// hasDNSService reports whether the user's top-level services include a "dns" entry. cloudbase-init gives
// those servers to every network that has no services of its own (networkconfig.py _process_networks).
func hasDNSService(services []json.RawMessage) bool {
	return slices.ContainsFunc(services, func(raw json.RawMessage) bool {
		var s struct {
			Type string `json:"type"`
		}
		return json.Unmarshal(raw, &s) == nil && s.Type == "dns"
	})
}

// spreadDNSServices copies each NIC's DNS services onto its other "ipv4"/"ipv6" network, when the user's
// data has top-level DNS services: cloudbase-init would apply those to that network, after our list, and
// replace it. cloud-init 22.4.2 renders the same; newer cloud-init lists the servers on both subnets.
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
