package netval

import (
	"fmt"
	"net"
)

// MAC is a 48-bit Ethernet address: comparable, usable as a map key, and the zero value means unset
// (SR-IOV CNI reports a VF without an administrative MAC as 00:00:00:00:00:00).
type MAC [6]byte

// ParseMAC accepts a 48-bit MAC in any form net.ParseMAC reads ("52:54:00:12:34:56",
// "52-54-00-12-34-56", "5254.0012.3456"); EUI-64 and 20-byte IPoIB addresses are refused.
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return MAC{}, fmt.Errorf("invalid MAC %s", Quote(s))
	}
	m, ok := macFromHardwareAddr(hw)
	if !ok {
		return MAC{}, fmt.Errorf("MAC %s is not a 48-bit Ethernet address", Quote(hw.String()))
	}
	return m, nil
}

// CheckHardwareAddr accepts any link-layer address net.ParseMAC does (EUI-48, EUI-64, 20-byte IPoIB):
// network-status and network-info list every network of the pod, not only ours, and an InfiniBand
// secondary network must not make the whole annotation unusable.
func CheckHardwareAddr(s string) error {
	if _, err := net.ParseMAC(s); err != nil {
		return fmt.Errorf("invalid MAC %s", Quote(s))
	}
	return nil
}

// macFromHardwareAddr converts a 6-byte hardware address; ok is false for any other length. Only
// ParseMAC needs it: every MAC past parsing is a MAC, so no consumer converts.
func macFromHardwareAddr(hw net.HardwareAddr) (m MAC, ok bool) {
	if len(hw) != len(m) {
		return MAC{}, false
	}
	copy(m[:], hw)
	return m, true
}

// IsZero reports whether m is unset (all zero).
func (m MAC) IsZero() bool { return m == MAC{} }

// IsMulticast reports whether the group bit is set: no NIC may have such an address.
func (m MAC) IsMulticast() bool { return m[0]&1 == 1 }

// CheckUnicast rejects a multicast MAC, which no NIC can have.
func (m MAC) CheckUnicast() error {
	if m.IsMulticast() {
		return fmt.Errorf("MAC %s is a multicast address", m)
	}
	return nil
}

// HardwareAddr returns a new net.HardwareAddr holding m; nil when m is zero.
func (m MAC) HardwareAddr() net.HardwareAddr {
	if m.IsZero() {
		return nil
	}
	return append(net.HardwareAddr(nil), m[:]...)
}

// String is the lower-case colon form, as cloud-init and libvirt write it.
func (m MAC) String() string { return net.HardwareAddr(m[:]).String() }
