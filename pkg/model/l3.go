package model

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Prefix lengths assumed for an address that only network-status has (it carries no prefix), and
// how far they may be widened to put a same-family gateway on-link. /24 and /64 are the commonest
// subnet sizes; narrower than the real subnet only loses direct reach to far peers (still reached
// through the gateway), while much wider would capture routes of the guest's other NICs.
const (
	guessedPrefixIPv4 = 24
	guessedPrefixIPv6 = 64
	widestPrefixIPv4  = 16
	widestPrefixIPv6  = 48
)

// setL3 fills Gateways, Addresses with PrefixKnown, and Routes, in that order: a guessed prefix is
// widened to reach a gateway.
func (d *derived) setL3(st *downwardapi.NetworkStatus, pn *downwardapi.PodNetwork, primary Family, f ifaceFailer) error {
	if err := d.setGateways(st, pn, primary, f); err != nil {
		return err
	}
	if err := d.setAddresses(st, pn, primary, f); err != nil {
		return err
	}
	return d.setRoutes(pn, primary, f)
}

// setGateways takes at most one gateway per family: pod-networks gateway_ips (primary role only) and
// default routes, then network-status gateway; link-local next hops are left out.
func (d *derived) setGateways(st *downwardapi.NetworkStatus, pn *downwardapi.PodNetwork, primary Family, f ifaceFailer) error {
	type gwCand struct {
		addr          netip.Addr
		source, field string // field is a format with the list index as its argument
		index         int
	}
	var cands []gwCand
	if pn != nil {
		// pod-networks gateway_ips become a default route only for the primary role: OVN-K sets them on
		// a secondary only when asked to, and a secondary NIC must not take the guest's default route.
		if pn.Role == RolePrimary {
			for i, g := range pn.Gateways {
				cands = append(cands, gwCand{g, downwardapi.PodNetworksAnnotation, "gateway_ips[%d]", i})
			}
		}
		for i, r := range pn.Routes {
			if r.Dest.IsValid() && r.Dest.Bits() == 0 {
				cands = append(cands, gwCand{r.NextHop, downwardapi.PodNetworksAnnotation, "routes[%d].nextHop", i})
			}
		}
	}
	if st != nil {
		// network-status "gateway" holds only the CNI result's default routes (utils.CreateNetworkStatus).
		for i, s := range st.Gateway {
			a, err := netval.ParseAddr(s)
			if err != nil {
				return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("gateway[%d]", i), err)
			}
			cands = append(cands, gwCand{a, downwardapi.NetworkStatusAnnotation, "gateway[%d]", i})
		}
	}
	have := map[Family]bool{}
	for _, c := range cands {
		if err := netval.CheckUnicast(c.addr); err != nil {
			return f.fail(c.source, fmt.Sprintf(c.field, c.index), err)
		}
		// A link-local next hop needs the guest's interface name to be usable, which cloud-init's
		// v1/v2/network_data.json gateways cannot carry portably; OVN-K also gives a global gateway.
		if c.addr.IsLinkLocalUnicast() || have[FamilyOf(c.addr)] {
			continue
		}
		have[FamilyOf(c.addr)] = true
		d.Gateways = append(d.Gateways, c.addr)
	}
	sortByFamily(d.Gateways, primary, FamilyOf)
	return nil
}

// setAddresses takes pod-networks ip_addresses (with their prefixes) or, without them, network-status
// ips with a guessed prefix; IPv6 link-local and repeated addresses are left out.
func (d *derived) setAddresses(st *downwardapi.NetworkStatus, pn *downwardapi.PodNetwork, primary Family, f ifaceFailer) error {
	seen := map[netip.Addr]bool{}
	if pn != nil && len(pn.IPAddresses) > 0 {
		for i, p := range pn.IPAddresses {
			field := func() string { return fmt.Sprintf("ip_addresses[%d]", i) }
			if !p.IsValid() {
				return f.fail(downwardapi.PodNetworksAnnotation, field(), errors.New("invalid CIDR"))
			}
			if err := netval.CheckUnicast(p.Addr()); err != nil {
				return f.fail(downwardapi.PodNetworksAnnotation, field(), err)
			}
			if p.Addr().Is4In6() {
				return f.fail(downwardapi.PodNetworksAnnotation, field(), fmt.Errorf("IPv4-mapped IPv6 address %s", p))
			}
			if skipAddress(p.Addr()) || seen[p.Addr()] {
				continue
			}
			seen[p.Addr()] = true
			d.Addresses = append(d.Addresses, p)
		}
		d.PrefixKnown = len(d.Addresses) > 0
	} else if st != nil {
		for i, s := range st.IPs {
			a, err := netval.ParseUnicast(s)
			if err != nil {
				return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("ips[%d]", i), err)
			}
			if skipAddress(a) || seen[a] {
				continue
			}
			seen[a] = true
			d.Addresses = append(d.Addresses, GuessPrefix(a, d.Gateways))
		}
	}
	sortByFamily(d.Addresses, primary, func(p netip.Prefix) Family { return FamilyOf(p.Addr()) })
	return nil
}

// setRoutes takes pod-networks routes other than the default (a gateway), masked and without repeats.
func (d *derived) setRoutes(pn *downwardapi.PodNetwork, primary Family, f ifaceFailer) error {
	if pn == nil {
		return nil
	}
	seen := map[Route]bool{}
	for i, r := range pn.Routes {
		field := "routes[" + strconv.Itoa(i) + "]"
		if !r.Dest.IsValid() {
			return f.fail(downwardapi.PodNetworksAnnotation, field+".dest", errors.New("invalid CIDR"))
		}
		if r.Dest.Bits() == 0 {
			continue // carried as a gateway (setGateways)
		}
		dest := r.Dest.Masked()
		hop := r.NextHop
		if hop.IsValid() && hop.IsUnspecified() {
			hop = netip.Addr{} // on-link
		}
		if hop.IsValid() {
			if FamilyOf(hop) != FamilyOf(dest.Addr()) {
				return f.fail(downwardapi.PodNetworksAnnotation, field+".nextHop",
					fmt.Errorf("next hop %s is not in the family of destination %s", hop, dest))
			}
			if err := netval.CheckUnicast(hop); err != nil {
				return f.fail(downwardapi.PodNetworksAnnotation, field+".nextHop", err)
			}
		}
		route := Route{Dest: dest, NextHop: hop}
		if seen[route] {
			continue
		}
		seen[route] = true
		d.Routes = append(d.Routes, route)
	}
	sortByFamily(d.Routes, primary, func(r Route) Family { return FamilyOf(r.Dest.Addr()) })
	return nil
}

// GuessPrefix gives a bare address (network-status "ips" have no prefix) the prefix this package
// assumes: /24 for IPv4, /64 for IPv6, widened (at most to /16 or /48) until the first same-family
// gateway is on-link, so that the default route stays usable. Beyond that width the default prefix is
// kept: a gateway that far away is not assumed on-link.
func GuessPrefix(a netip.Addr, gateways []netip.Addr) netip.Prefix {
	bits, widest := guessedPrefixIPv4, widestPrefixIPv4
	if FamilyOf(a) == IPv6 {
		bits, widest = guessedPrefixIPv6, widestPrefixIPv6
	}
	for _, g := range gateways {
		if FamilyOf(g) != FamilyOf(a) {
			continue
		}
		for b := bits; b >= widest; b-- {
			if p, _ := a.Prefix(b); p.Contains(g) {
				return netip.PrefixFrom(a, b)
			}
		}
		break
	}
	return netip.PrefixFrom(a, bits)
}

// skipAddress drops IPv6 link-local addresses: the guest makes its own from its MAC, and the pod's
// one belongs to the pod interface, not to the VF.
func skipAddress(a netip.Addr) bool {
	return a.Is6() && a.IsLinkLocalUnicast()
}
