package netval

import (
	"fmt"
	"strconv"
	"strings"
)

// PCIAddress is a PCI address in libvirt's fields (<address domain= bus= slot= function=>).
type PCIAddress struct {
	Domain   uint32
	Bus      uint8
	Slot     uint8 // 0x00-0x1f
	Function uint8 // 0-7
}

// PCI address widths. The domain has 4 to 8 hex digits: the kernel names a device "%04x:%02x:%02x.%d" with a
// 32-bit domain (drivers/pci/pci.c pci_name), and Intel VMD domains start at 0x10000 (drivers/pci/controller/vmd.c);
// libvirt accepts a 32-bit domain (src/util/virpci.c virPCIDeviceAddressIsValid). KubeVirt's PCI_ADDRESS_PATTERN
// (pkg/util/hardware/hw_utils.go) wants exactly 4, but only for its own sriov binding and VMI pciAddress.
const (
	minPCIDomainDigits = 4
	maxPCIDomainDigits = 8
	maxPCISlot         = 0x1f // a PCI device number is 5 bits
	maxPCIFunction     = 7
)

// ParsePCIAddress reads the sysfs form domain:bus:slot.function ("0000:65:00.2"), hex digits of either case.
func ParsePCIAddress(s string) (PCIAddress, error) {
	// A missing separator leaves the fields after it empty, which hexField refuses.
	domain, rest, _ := strings.Cut(s, ":")
	bus, rest, _ := strings.Cut(rest, ":")
	slot, fn, _ := strings.Cut(rest, ".")
	d, okDomain := hexField(domain, minPCIDomainDigits, maxPCIDomainDigits)
	b, okBus := hexField(bus, 2, 2)
	sl, okSlot := hexField(slot, 2, 2)
	if !okDomain || !okBus || !okSlot || len(fn) != 1 || fn[0] < '0' || fn[0] > '0'+maxPCIFunction {
		return PCIAddress{}, fmt.Errorf("invalid PCI address %s: want dddd:bb:ss.f in hex, with 4 to 8 domain digits", Quote(s))
	}
	if sl > maxPCISlot {
		return PCIAddress{}, fmt.Errorf("invalid PCI address %s: slot 0x%02x is above 0x%02x", Quote(s), sl, maxPCISlot)
	}
	return PCIAddress{Domain: uint32(d), Bus: uint8(b), Slot: uint8(sl), Function: fn[0] - '0'}, nil
}

// hexField parses minLen to maxLen hex digits (at most 8), without sign or prefix.
func hexField(s string, minLen, maxLen int) (uint64, bool) {
	v, err := strconv.ParseUint(s, 16, 32)
	return v, err == nil && len(s) >= minLen && len(s) <= maxLen
}

// String is the canonical sysfs form: lower case, the domain at least 4 digits.
func (a PCIAddress) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%d", a.Domain, a.Bus, a.Slot, a.Function)
}
