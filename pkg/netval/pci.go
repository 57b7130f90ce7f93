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

// PCI address widths. The domain has 4 to 8 hex digits: the kernel names a device "%04x:%02x:%02x.%d"
// with a 32-bit domain (drivers/pci/pci.c pci_name via dev_set_name in pci_setup_device), so a domain
// above 0xffff prints with more digits; Intel VMD domains start at 0x10000
// (drivers/pci/controller/vmd.c vmd_find_free_domain). libvirt accepts a 32-bit domain
// (src/util/virpci.c virPCIDeviceAddressIsValid: domain <= 0xFFFFFFFF, since libvirt 6.x). KubeVirt's
// own pattern (pkg/util/hardware/hw_utils.go PCI_ADDRESS_PATTERN) wants exactly 4, but it applies to
// KubeVirt's own sriov binding and to VMI pciAddress, which KubeVirt's webhook has checked before we see it.
const (
	minPCIDomainDigits = 4
	maxPCIDomainDigits = 8
	maxPCISlot         = 0x1f // a PCI device number is 5 bits
	maxPCIFunction     = 7
)

// ParsePCIAddress reads the sysfs form domain:bus:slot.function ("0000:65:00.2"), hex digits of either case.
func ParsePCIAddress(s string) (PCIAddress, error) {
	invalid := func(why string) (PCIAddress, error) {
		return PCIAddress{}, fmt.Errorf("invalid PCI address %s: %s", Quote(s), why)
	}
	domain, rest, ok := strings.Cut(s, ":")
	if !ok || len(domain) < minPCIDomainDigits || len(domain) > maxPCIDomainDigits || !isHex(domain) {
		return invalid("want dddd:bb:ss.f in hex, with 4 to 8 domain digits")
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok || len(bus) != 2 || !isHex(bus) {
		return invalid("want dddd:bb:ss.f in hex, with 4 to 8 domain digits")
	}
	slot, fn, ok := strings.Cut(rest, ".")
	if !ok || len(slot) != 2 || !isHex(slot) || len(fn) != 1 || fn[0] < '0' || fn[0] > '0'+maxPCIFunction {
		return invalid("want dddd:bb:ss.f in hex, with 4 to 8 domain digits")
	}
	// Cannot fail: the digits were checked above and fit their widths.
	d, _ := strconv.ParseUint(domain, 16, 32)
	b, _ := strconv.ParseUint(bus, 16, 8)
	sl, _ := strconv.ParseUint(slot, 16, 8)
	if sl > maxPCISlot {
		return invalid(fmt.Sprintf("slot 0x%02x is above 0x%02x", sl, maxPCISlot))
	}
	return PCIAddress{Domain: uint32(d), Bus: uint8(b), Slot: uint8(sl), Function: fn[0] - '0'}, nil
}

// IsPCIAddress reports whether ParsePCIAddress accepts s.
func IsPCIAddress(s string) bool {
	_, err := ParsePCIAddress(s)
	return err == nil
}

// String is the canonical sysfs form: lower case, the domain at least 4 digits.
func (a PCIAddress) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%d", a.Domain, a.Bus, a.Slot, a.Function)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return s != ""
}
