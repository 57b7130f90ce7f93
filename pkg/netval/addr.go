package netval

import (
	"errors"
	"fmt"
	"net/netip"
)

// ParseAddr accepts a bare IPv4 or IPv6 address without a zone; an IPv4-mapped IPv6 address is
// unmapped, so that consumers compare families reliably.
func ParseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("invalid IP address %s", Quote(s))
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %s has a zone", Quote(s))
	}
	return a.Unmap(), nil
}

// ParsePrefix accepts "addr/bits" and keeps the host bits (pod-networks carries "10.20.2.5/24");
// an IPv4-mapped IPv6 prefix is refused.
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %s", Quote(s))
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %s: IPv4-mapped IPv6", Quote(s))
	}
	return p, nil
}

// CheckUnicast rejects addresses no NIC or next hop can have: invalid, zoned, unspecified,
// multicast, loopback and the IPv4 limited broadcast.
func CheckUnicast(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return errors.New("missing IP address")
	case a.Zone() != "":
		return fmt.Errorf("IP address %s has a zone", a)
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is not a unicast address", a)
	}
	return nil
}

// ParseUnicast is ParseAddr followed by CheckUnicast: an address a NIC, next hop or nameserver can have.
func ParseUnicast(s string) (netip.Addr, error) {
	a, err := ParseAddr(s)
	if err == nil {
		err = CheckUnicast(a)
	}
	if err != nil {
		return netip.Addr{}, err
	}
	return a, nil
}
