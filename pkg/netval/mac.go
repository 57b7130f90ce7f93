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
	var m MAC
	if len(hw) != len(m) {
		return MAC{}, fmt.Errorf("MAC %s is not a 48-bit Ethernet address", Quote(hw.String()))
	}
	copy(m[:], hw)
	return m, nil
}

// CheckHardwareAddr accepts any link-layer address net.ParseMAC does (EUI-48, EUI-64, 20-byte IPoIB): the
// annotations list every network of the pod, and an InfiniBand one must not make them unusable.
func CheckHardwareAddr(s string) error {
	if _, err := net.ParseMAC(s); err != nil {
		return fmt.Errorf("invalid MAC %s", Quote(s))
	}
	return nil
}

// IsZero reports whether m is unset (all zero).
func (m MAC) IsZero() bool { return m == MAC{} }

// CheckUnicast rejects a multicast MAC (the group bit set), which no NIC can have.
func (m MAC) CheckUnicast() error {
	if m[0]&1 == 1 {
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
