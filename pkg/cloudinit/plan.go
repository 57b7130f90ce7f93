package cloudinit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// nicPlan is one bound interface reduced to what every output format needs, validated once so that the
// renderers only arrange it. Families are kept apart: several 22.4.2 renderers go wrong when a route
// sits on a subnet of the other family.
type nicPlan struct {
	iface string // VMI interface name, for error messages only
	name  string // guest interface name (see guestName)
	mac   netval.MAC
	mtu   int // 0 = omit
	dhcp4 bool
	dhcp6 bool
	// static holds the addresses in the model's order (primary family first); empty for DHCP NICs.
	static      []netip.Prefix
	gateway4    netip.Addr
	gateway6    netip.Addr
	routes      []model.Route
	nameservers []netip.Addr
	search      []string
}

func (p *nicPlan) gateway(f model.Family) netip.Addr {
	if f == model.IPv4 {
		return p.gateway4
	}
	return p.gateway6
}

// hasFamily reports whether the NIC gets an address of family f (static or DHCP).
func (p *nicPlan) hasFamily(f model.Family) bool {
	return f == model.IPv4 && p.dhcp4 || f == model.IPv6 && p.dhcp6 ||
		slices.ContainsFunc(p.static, func(a netip.Prefix) bool { return model.FamilyOf(a.Addr()) == f })
}

// guestName keeps the VMI interface name when it is a safe Linux name (15 bytes), so the guest NIC is
// recognisable, unless it looks like a name the kernel or udev hands out (a rename could collide with it)
// or one the kernel refuses ("default" and "all" name sysctl directories: EINVAL). Otherwise the name is
// "vf" + 11 hex digits of sha256(VMI interface name): stable across restarts and migrations.
func guestName(vmiIface string) string {
	if isSafeIfname(vmiIface) && !looksKernelAssigned(vmiIface) && !strings.HasPrefix(vmiIface, "vf") {
		return vmiIface
	}
	sum := sha256.Sum256([]byte(vmiIface))
	return "vf" + hex.EncodeToString(sum[:])[:11]
}

// guestNameOf is guestName for a VF; a NIC that is not one (the virtio pod-network NIC) gets the same
// rule with "nic" in place of "vf", so that no guest name calls it a VF.
func guestNameOf(b *model.BoundInterface) string {
	name := guestName(b.Name)
	if b.Virtio && name != b.Name {
		return "nic" + strings.TrimPrefix(name, "vf")
	}
	return name
}

// isSafeIfname reports whether s is a letter followed by at most 14 letters, digits, "_" or "-".
func isSafeIfname(s string) bool {
	if len(s) == 0 || len(s) > 15 || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIfnameByte(s[i]) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isIfnameByte(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' || c == '_' || c == '-' }

// kernelNamePrefixes start the names the kernel and udev hand out.
var kernelNamePrefixes = [...]string{"eth", "en", "wl", "ww", "ib", "sl", "bond", "veth", "tap", "tun", "br"}

// looksKernelAssigned reports whether s starts with a kernelNamePrefixes entry or is a name the kernel
// refuses or has taken.
func looksKernelAssigned(s string) bool {
	return slices.ContainsFunc(kernelNamePrefixes[:], func(p string) bool { return strings.HasPrefix(s, p) }) ||
		slices.Contains([]string{"lo", "all", "default"}, s)
}

// checkAddr keeps forms no renderer can write out of the files (the model has applied netval.CheckUnicast).
func checkAddr(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return fmt.Errorf("invalid address")
	case a.Zone() != "":
		return fmt.Errorf("address %q has a zone", a.String())
	case a.Is4In6():
		return fmt.Errorf("address %s is IPv4-mapped IPv6", a)
	case a.IsUnspecified():
		return fmt.Errorf("address %s is unspecified", a)
	}
	return nil
}

// planNICs validates ifaces and reduces them to plans, in input order.
func planNICs(ifaces []model.BoundInterface) ([]nicPlan, error) {
	plans := make([]nicPlan, 0, len(ifaces))
	names := make(map[string]string, len(ifaces))
	macs := make(map[netval.MAC]string, len(ifaces))
	for i := range ifaces {
		p, err := planNIC(&ifaces[i])
		if err != nil {
			return nil, fmt.Errorf("cloud-init config for interface %q: %w", ifaces[i].Name, err)
		}
		if other, dup := names[p.name]; dup {
			return nil, fmt.Errorf("cloud-init config: interfaces %q and %q get the same guest name %q", other, p.iface, p.name)
		}
		if other, dup := macs[p.mac]; dup {
			return nil, fmt.Errorf("cloud-init config: interfaces %q and %q have the same MAC %s", other, p.iface, p.mac)
		}
		names[p.name], macs[p.mac] = p.iface, p.iface
		plans = append(plans, p)
	}
	return plans, nil
}

// planNIC validates one interface and reduces it to a plan, step by step.
func planNIC(b *model.BoundInterface) (nicPlan, error) {
	p := nicPlan{iface: b.Name, name: guestNameOf(b), mac: b.MAC, mtu: b.MTU}
	if b.MAC.IsZero() {
		return p, fmt.Errorf("no MAC address from any source (VMI macAddress, network-status, pod-networks): cloud-init can only match the NIC by MAC")
	}
	if err := netval.CheckMTU(b.MTU); err != nil {
		return p, err
	}
	present, err := addressFamilies(b.Addresses)
	if err != nil {
		return p, err
	}
	if err := p.planGateways(b.Gateways); err != nil {
		return p, err
	}
	if err := p.planAddressing(b, present); err != nil {
		return p, err
	}
	if err := p.planRoutes(b.Routes); err != nil {
		return p, err
	}
	return p, p.planDNS(b.DNS)
}

// addressFamilies validates the interface's addresses and says which families they cover.
func addressFamilies(addrs []netip.Prefix) (map[model.Family]bool, error) {
	present := map[model.Family]bool{}
	for _, a := range addrs {
		if !a.IsValid() {
			return nil, fmt.Errorf("address %q: invalid prefix", a.String())
		}
		if err := checkAddr(a.Addr()); err != nil {
			return nil, fmt.Errorf("address %s: %w", a, err)
		}
		if a.Bits() == 0 {
			return nil, fmt.Errorf("address %s has prefix length 0", a)
		}
		present[model.FamilyOf(a.Addr())] = true
	}
	return present, nil
}

// planGateways takes at most one gateway per family.
func (p *nicPlan) planGateways(gateways []netip.Addr) error {
	for _, g := range gateways {
		if err := checkAddr(g); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		f := model.FamilyOf(g)
		if p.gateway(f).IsValid() {
			return fmt.Errorf("two IPv%d gateways (%s, %s): at most one default route per family", f, p.gateway(f), g)
		}
		if f == model.IPv4 {
			p.gateway4 = g
		} else {
			p.gateway6 = g
		}
	}
	return nil
}

// planAddressing decides between DHCP and static addresses; a gateway needs an address of its family to
// hang the default route on.
func (p *nicPlan) planAddressing(b *model.BoundInterface, present map[model.Family]bool) error {
	if b.DHCP {
		// pod-networks ipam_mode "dhcp" (OKEP-6224) is IPv4 only: the DHCP server supplies the IPv4
		// address, default route and DNS (the IPv4 addresses the model knows are the lease, for the
		// interface cache). An IPv6 address is configured statically, as on a static NIC. The pod NIC
		// (model.FindPodNIC) has no addresses: DHCPv4 only, as cloud-init's fallback.
		p.dhcp4, p.gateway4 = true, netip.Addr{}
		for _, a := range b.Addresses {
			if model.FamilyOf(a.Addr()) == model.IPv6 {
				p.static = append(p.static, a)
			}
		}
	} else {
		p.static = append([]netip.Prefix(nil), b.Addresses...)
	}
	for _, f := range []model.Family{model.IPv4, model.IPv6} {
		if p.gateway(f).IsValid() && !present[f] {
			return fmt.Errorf("IPv%d gateway %s but no IPv%d address to attach the default route to", f, p.gateway(f), f)
		}
	}
	return nil
}

// planRoutes keeps the non-default routes whose family the interface has.
func (p *nicPlan) planRoutes(routes []model.Route) error {
	for _, r := range routes {
		if !r.Dest.IsValid() {
			return fmt.Errorf("route destination %q: invalid prefix", r.Dest.String())
		}
		if r.Dest.Bits() == 0 {
			return fmt.Errorf("route %s: default routes must come as gateways (cloud-init 22.4.2 mis-renders ::/0 routes)", r.Dest)
		}
		hop := r.NextHop
		if hop.IsValid() && hop.IsUnspecified() {
			hop = netip.Addr{} // 0.0.0.0 or ::: on-link, as no next hop
		}
		if hop.IsValid() {
			if err := checkAddr(hop); err != nil {
				return fmt.Errorf("route %s next hop: %w", r.Dest, err)
			}
		}
		if r.Dest.Addr().Is4In6() && !hop.IsValid() {
			return fmt.Errorf("route %s: IPv4-mapped IPv6 destination", r.Dest)
		}
		f := model.FamilyOf(r.Dest.Addr())
		if hop.IsValid() && (r.Dest.Addr().Is4In6() || model.FamilyOf(hop) != f) {
			return fmt.Errorf("route %s via %s mixes address families", r.Dest, hop)
		}
		if !p.hasFamily(f) {
			via := "on-link"
			if hop.IsValid() {
				via = hop.String()
			}
			return fmt.Errorf("route %s via %s but the interface has no IPv%d address", r.Dest, via, f)
		}
		p.routes = append(p.routes, model.Route{Dest: r.Dest.Masked(), NextHop: hop})
	}
	return nil
}

// planDNS takes nameservers and search domains for a NIC with static addresses only: DHCP NICs take DNS
// from the server (where DNS is per adapter, as on Windows, ours would override it), and a NIC without
// addresses has no subnet to carry it.
func (p *nicPlan) planDNS(dns model.DNS) error {
	if len(p.static) == 0 || p.dhcp4 {
		return nil
	}
	seen := map[netip.Addr]bool{}
	for _, ns := range dns.Nameservers {
		if err := checkAddr(ns); err != nil {
			return fmt.Errorf("DNS nameserver: %w", err)
		}
		if !seen[ns] {
			seen[ns] = true
			p.nameservers = append(p.nameservers, ns)
		}
	}
	domains := dns.Search
	if dns.Domain != "" {
		domains = append([]string{dns.Domain}, domains...)
	}
	seenDomain := map[string]bool{}
	for _, d := range domains {
		// Keeps separators out of the files cloud-init renders (resolv.conf, ifcfg, .network).
		if !netval.ValidDNSName(d) {
			return fmt.Errorf("DNS search domain %q is not a valid domain name", d)
		}
		if !seenDomain[d] {
			seenDomain[d] = true
			p.search = append(p.search, d)
		}
	}
	return nil
}

// unspecified is the unspecified address of f: the network of a default route, and the gateway text of a
// route with no next hop (on-link). cloud-init 22.4.2 has no on-link form: every renderer reads a route's
// "gateway" (eni.py _render_route and sysconfig.py raise KeyError without one). networkd, network-manager
// and sysconfig for IPv4 read the unspecified address as on-link; the eni renderer's `route add ... gw
// 0.0.0.0` and sysconfig's IPv6 `via ::` are refused by the kernel, so there the route is missing
// (docs/guests.md).
func unspecified(f model.Family) string {
	if f == model.IPv4 {
		return "0.0.0.0"
	}
	return "::"
}

// routeGateway is the gateway text cloud-init gets for r: its next hop, or the unspecified address.
func routeGateway(r model.Route) string {
	if r.NextHop.IsValid() {
		return r.NextHop.String()
	}
	return unspecified(model.FamilyOf(r.Dest.Addr()))
}
