package netval

import "fmt"

// MTU bounds of a guest NIC: RFC 791 makes 68 the least an IPv4 link may have, and the IP total-length
// field makes 65535 the most. 0 means unknown everywhere in this project.
const (
	MinMTU = 68
	MaxMTU = 65535
)

// CheckMTU accepts 0 (unknown) or a value in MinMTU-MaxMTU.
func CheckMTU(mtu int) error {
	if mtu != 0 && (mtu < MinMTU || mtu > MaxMTU) {
		return fmt.Errorf("MTU %d out of range %d-%d: a link MTU outside it cannot carry IP", mtu, MinMTU, MaxMTU)
	}
	return nil
}

// CheckReportedMTU accepts any value an annotation may carry for a network that is not necessarily
// ours (0-MaxMTU): whether it fits a guest NIC is CheckMTU's question, for bound interfaces only.
func CheckReportedMTU(mtu int) error {
	if mtu < 0 || mtu > MaxMTU {
		return fmt.Errorf("out of range: %d", mtu)
	}
	return nil
}
