package domain

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Errors Apply and WiredByKubeVirt wrap, for errors.Is.
var (
	ErrMalformedDomain       = errors.New("domain XML is not a single well-formed <domain> document")
	ErrMissingDeviceInfo     = errors.New("device-info missing")
	ErrUnsupportedDeviceType = errors.New("unsupported device-info type")
	ErrInvalidPCIAddress     = errors.New("invalid PCI address")
	ErrInvalidInterface      = errors.New("invalid bound interface")
	ErrAliasConflict         = errors.New("alias already used by another device")
)

// WiredByKubeVirt reports whether the domain already has an <interface> whose alias is
// ua-<ifaceName>: KubeVirt wires a binding plugin's NIC itself when the binding is registered with
// domainAttachmentType tap or managedTap (pkg/virt-launcher/virtwrap/converter/network/configurator.go).
func (doc *Document) WiredByKubeVirt(ifaceName string) (bool, error) {
	if err := validateIfaceName(ifaceName); err != nil {
		return false, err
	}
	return doc.wiredByKubeVirt(ifaceName), nil
}

func (doc *Document) wiredByKubeVirt(ifaceName string) bool {
	if doc.devices == nil {
		return false
	}
	return slices.ContainsFunc(doc.devices.children, func(d device) bool {
		return d.element == "interface" && d.alias == interfaceAlias(ifaceName)
	})
}

// Apply parses domainXML and applies ifaces to it (Document.Apply).
func Apply(domainXML []byte, ifaces []model.BoundInterface) ([]byte, error) {
	doc, err := Parse(context.Background(), domainXML)
	if err != nil {
		return nil, err
	}
	return doc.Apply(ifaces)
}

// Apply returns the domain with one <hostdev> per bound interface that needs one; interfaces KubeVirt
// already wired (<interface> alias ua-<name>) are skipped. virt-launcher calls OnDefineDomain several
// times per start and feeds each call the previous result (pkg/virt-launcher/virtwrap/util/libvirt_helper.go,
// SetDomainSpecStrWithHooks), and since #17605 (KubeVirt main, virtwrap/manager.go allocateHotplugPorts)
// also the domain as libvirt read it back after a define, in which our hostdev carries the guest PCI
// <address> libvirt assigned. So a hostdev with our alias that already says what we would write (same VF,
// managed, boot order, and the VMI's pciAddress when it sets one) is left exactly as it is, its libvirt
// address and anything libvirt added included; one that differs is replaced where it stands, keeping the
// guest address it had when the VMI sets none (the VF keeps its slot in the guest); repeats of it are
// removed; the hostdevs of interfaces without one go after the last other device, indented like it.
// Every byte outside the replaced hostdevs is kept, Apply is idempotent, and when nothing changes the
// result is the parsed source itself.
func (doc *Document) Apply(ifaces []model.BoundInterface) ([]byte, error) {
	seen := make(map[string]bool, len(ifaces))
	var needed []model.BoundInterface
	for _, iface := range ifaces {
		if err := validateIfaceName(iface.Name); err != nil {
			return nil, fmt.Errorf("network %q: %w", iface.Network, err)
		}
		if seen[iface.Name] {
			return nil, fmt.Errorf("%w: interface %q is listed twice", ErrInvalidInterface, iface.Name)
		}
		seen[iface.Name] = true
		if doc.wiredByKubeVirt(iface.Name) {
			continue // KubeVirt's <interface> is the NIC: nothing of ours goes into the domain
		}
		needed = append(needed, iface)
	}
	if len(needed) == 0 {
		return doc.src, nil
	}
	if doc.devices == nil {
		return nil, fmt.Errorf("%w: no <devices> element to add hostdevs for interface %q to", ErrMalformedDomain, needed[0].Name)
	}

	hostPCI := make(map[netval.PCIAddress]string, len(needed)) // host PCI address -> interface name
	var hostdevs []hostdevXML
	for _, iface := range needed {
		hd, err := newHostdev(iface)
		if err != nil {
			return nil, err
		}
		key, _ := netval.ParsePCIAddress(iface.HostPCIAddress) // newHostdev has parsed it
		if other, dup := hostPCI[key]; dup {
			return nil, fmt.Errorf("%w: interfaces %q and %q both have host PCI address %q",
				ErrInvalidInterface, other, iface.Name, iface.HostPCIAddress)
		}
		hostPCI[key] = iface.Name
		hostdevs = append(hostdevs, hostdevXML{name: iface.Name, hostdev: hd})
	}
	return splice(doc.src, doc.devices, hostdevs)
}

// splice puts the hostdevs into <devices>: a hostdev child with one of the given aliases is kept when it
// already says what ours says (sameHostdev), else replaced in place (with its guest address when ours has
// none); later children with that alias are removed with the whitespace before them; hostdevs with no
// such child go after the last remaining device.
func splice(src []byte, devs *devicesElement, hostdevs []hostdevXML) ([]byte, error) {
	byAlias := make(map[string]*hostdevXML, len(hostdevs))
	for i := range hostdevs {
		byAlias[HostdevAlias(hostdevs[i].name)] = &hostdevs[i]
	}
	var (
		edits []edit
		kept  []device
	)
	placed := make(map[string]bool, len(hostdevs))
	for _, d := range devs.children {
		hd, ours := byAlias[d.alias]
		switch {
		case ours && d.element == "hostdev" && placed[d.alias]:
			edits = append(edits, edit{start: d.leadStart, end: d.end})
		case ours && d.element == "hostdev":
			placed[d.alias] = true
			kept = append(kept, d)
			// libvirtxml refuses some hostdevs (no mode=): such a one is replaced.
			have := &libvirtxml.DomainHostdev{}
			parsed := xml.Unmarshal(src[d.start:d.end], have) == nil
			if parsed && sameHostdev(have, hd.hostdev) {
				continue
			}
			if parsed && hd.hostdev.Address == nil && have.Address != nil && have.Address.PCI != nil {
				hd.hostdev.Address = &libvirtxml.DomainAddress{PCI: have.Address.PCI}
			}
			// Indented as d is: its lead's last line.
			indent, indented := afterLastBreak(d.lead)
			text, err := marshalHostdev(*hd, indented, indent, indentUnit(devs))
			if err != nil {
				return nil, err
			}
			edits = append(edits, edit{start: d.start, end: d.end, text: strings.TrimPrefix(text, indent)})
		case ours:
			// libvirt rejects duplicate aliases, and KubeVirt's NetStat would report this device as
			// our interface: refuse rather than define a domain that fails or misreports.
			return nil, fmt.Errorf("%w: interface %q: the domain already has a <%s> with alias %q",
				ErrAliasConflict, hd.name, d.element, d.alias)
		default:
			kept = append(kept, d)
		}
	}

	var fresh []hostdevXML
	for _, hd := range hostdevs {
		if !placed[HostdevAlias(hd.name)] {
			fresh = append(fresh, hd)
		}
	}
	if len(fresh) == 0 {
		if len(edits) == 0 {
			return src, nil
		}
		return applyEdits(src, edits), nil
	}

	l := newLayout(devs, kept)
	insert, err := l.render(fresh)
	if err != nil {
		return nil, err
	}

	if devs.selfClosing {
		// <devices/> (or <devices .../>): reopen it so that it can hold children.
		tag := bytes.TrimSuffix(src[devs.startTagStart:devs.startTagEnd], []byte("/>"))
		return applyEdits(src, []edit{{
			start: devs.startTagStart,
			end:   devs.startTagEnd,
			text:  string(tag) + ">" + insert + l.closingLead + "</devices>",
		}}), nil
	}

	edits = append([]edit{{start: l.insertAt, end: l.insertAt, text: insert}}, edits...)
	if l.closingLead != "" && !strings.Contains(survivingText(src, l.insertAt, devs.endTagStart, edits[1:]), "\n") {
		// Nothing left between the new hostdevs and </devices> ends the line: end it ourselves.
		edits = append(edits, edit{start: devs.endTagStart, end: devs.endTagStart, text: l.closingLead})
	}
	return applyEdits(src, edits), nil
}

// sameHostdev reports whether have, a hostdev with our alias found in the domain, already says everything
// want says: a PCI subsystem hostdev of the same VF, managed the same, with the same boot order, and at
// want's guest address when want has one. What want leaves to libvirt (the guest address when the VMI sets
// no pciAddress, the vfio driver element libvirt fills in) may be anything.
func sameHostdev(have, want *libvirtxml.DomainHostdev) bool {
	if have.SubsysPCI == nil || have.SubsysPCI.Source == nil || have.Managed != want.Managed {
		return false
	}
	if !samePCI(have.SubsysPCI.Source.Address, want.SubsysPCI.Source.Address) {
		return false
	}
	if (have.Boot == nil) != (want.Boot == nil) || have.Boot != nil && have.Boot.Order != want.Boot.Order {
		return false
	}
	if want.Address != nil {
		return have.Address != nil && samePCI(have.Address.PCI, want.Address.PCI)
	}
	// libvirt gives a PCI hostdev a PCI guest address; any other kind is not one we could have left.
	return have.Address == nil || have.Address.PCI != nil
}

// samePCI compares two PCI addresses by value (an absent domain, bus, slot or function is 0, as libvirt reads it).
func samePCI(a, b *libvirtxml.DomainAddressPCI) bool {
	if a == nil || b == nil {
		return a == b
	}
	v := func(p *uint) uint {
		if p == nil {
			return 0
		}
		return *p
	}
	return v(a.Domain) == v(b.Domain) && v(a.Bus) == v(b.Bus) && v(a.Slot) == v(b.Slot) && v(a.Function) == v(b.Function)
}

// marshalHostdev marshals hd, each line after indent with unit per level when indented, else on one line.
func marshalHostdev(hd hostdevXML, indented bool, indent, unit string) (string, error) {
	var (
		raw []byte
		err error
	)
	if indented {
		raw, err = xml.MarshalIndent(hd.hostdev, indent, unit)
	} else {
		raw, err = xml.Marshal(hd.hostdev)
	}
	if err != nil {
		return "", fmt.Errorf("interface %q: marshal hostdev: %w", hd.name, err)
	}
	return string(raw), nil
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// applyEdits applies non-overlapping edits; at equal offsets, insertions listed first go first.
func applyEdits(src []byte, edits []edit) []byte {
	slices.SortStableFunc(edits, func(a, b edit) int { return a.start - b.start })
	var out bytes.Buffer
	out.Grow(len(src) + len(edits)*512)
	pos := 0
	for _, e := range edits {
		out.Write(src[pos:e.start])
		out.WriteString(e.text)
		pos = e.end
	}
	out.Write(src[pos:])
	return out.Bytes()
}

// survivingText is src[from:to] without the cut ranges.
func survivingText(src []byte, from, to int, cuts []edit) string {
	var b strings.Builder
	for _, c := range cuts {
		if c.end <= from || c.start >= to {
			continue
		}
		b.Write(src[from:max(from, c.start)])
		from = max(from, c.end)
	}
	if from < to {
		b.Write(src[from:to])
	}
	return b.String()
}

type hostdevXML struct {
	name    string
	hostdev *libvirtxml.DomainHostdev
}

// layout says where and how to indent inserted hostdevs so that the document keeps its own style
// (KubeVirt's hook manager sends xml.MarshalIndent output with tabs; other producers use spaces or
// nothing) and a second Apply reproduces the first byte for byte.
type layout struct {
	insertAt    int
	indented    bool
	childIndent string // whitespace before each hostdev's start tag, after the line break
	unit        string // one nesting level
	closingLead string // whitespace to put before </devices> if nothing else ends the last line
}

func newLayout(devs *devicesElement, kept []device) layout {
	l := layout{insertAt: devs.startTagEnd}
	if len(kept) > 0 {
		l.insertAt = kept[len(kept)-1].end
	}
	devIndent, devIndented := afterLastBreak(devs.lead)
	l.unit = indentUnit(devs)
	l.indented = devIndented
	l.childIndent = devIndent + l.unit
	if len(kept) > 0 {
		l.indented = false
		for i := len(kept) - 1; i >= 0; i-- {
			if indent, ok := afterLastBreak(kept[i].lead); ok {
				l.indented, l.childIndent = true, indent
				break
			}
		}
	}
	if l.indented {
		l.closingLead = "\n" + devIndent
	}
	return l
}

// indentUnit is one nesting level of the document: the indentation of <devices>, which is one level below
// <domain>, or two spaces.
func indentUnit(devs *devicesElement) string {
	if unit, _ := afterLastBreak(devs.lead); unit != "" {
		return unit
	}
	return "  "
}

// afterLastBreak returns the whitespace after the last line break of lead, and whether there is one.
func afterLastBreak(lead string) (string, bool) {
	i := strings.LastIndexByte(lead, '\n')
	if i < 0 {
		return "", false
	}
	return lead[i+1:], true
}

func (l layout) render(hostdevs []hostdevXML) (string, error) {
	var b strings.Builder
	for _, hd := range hostdevs {
		text, err := marshalHostdev(hd, l.indented, l.childIndent, l.unit)
		if err != nil {
			return "", err
		}
		if l.indented {
			b.WriteString("\n")
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

const (
	// userAliasPrefix marks a user-defined libvirt alias; KubeVirt's api.Alias strips it on unmarshal
	// (pkg/virt-launcher/virtwrap/api/schema.go, UserAliasPrefix).
	userAliasPrefix = "ua-"
	// sriovAliasPrefix is what KubeVirt's NetStat looks for to report a hostdev as the VMI interface
	// named by the rest of the alias (pkg/network/deviceinfo/sriov.go, SRIOVAliasPrefix;
	// pkg/network/setup/netstat.go, sriovIfacesStatusFromDomainHostDevices).
	sriovAliasPrefix = "sriov-"

	deviceTypePCI = "pci"
)

// HostdevAlias is the libvirt alias of the hostdev that carries interface ifaceName's VF.
func HostdevAlias(ifaceName string) string {
	return userAliasPrefix + sriovAliasPrefix + ifaceName
}

// interfaceAlias is the alias KubeVirt gives an <interface> it wires for VMI interface ifaceName.
func interfaceAlias(ifaceName string) string {
	return userAliasPrefix + ifaceName
}

func validateIfaceName(name string) error {
	// KubeVirt's rule is a subset of what libvirt accepts in a user alias.
	if !model.ValidInterfaceName(name) {
		return fmt.Errorf("%w: interface name %q: want letters, digits, '-' or '_' (KubeVirt's own rule)", ErrInvalidInterface, name)
	}
	return nil
}

// newHostdev builds the <hostdev> for one bound interface from its device-info and VMI spec.
func newHostdev(iface model.BoundInterface) (*libvirtxml.DomainHostdev, error) {
	if iface.DeviceType != "" && iface.DeviceType != deviceTypePCI {
		return nil, fmt.Errorf("%w: interface %q (network %q): device-info type %q, only %q can be a hostdev",
			ErrUnsupportedDeviceType, iface.Name, iface.Network, iface.DeviceType, deviceTypePCI)
	}
	if iface.HostPCIAddress == "" {
		return nil, fmt.Errorf("%w: interface %q (network %q): no device-info PCI address",
			ErrMissingDeviceInfo, iface.Name, iface.Network)
	}
	host, err := parsePCIAddress(iface.HostPCIAddress)
	if err != nil {
		return nil, fmt.Errorf("interface %q (network %q): device-info pci-address: %w", iface.Name, iface.Network, err)
	}
	hostdev := &libvirtxml.DomainHostdev{
		Managed: "no", // the VF is bound to vfio-pci by the device plugin, not by libvirt
		SubsysPCI: &libvirtxml.DomainHostdevSubsysPCI{
			Source: &libvirtxml.DomainHostdevSubsysPCISource{Address: host},
		},
		Alias: &libvirtxml.DomainAlias{Name: HostdevAlias(iface.Name)},
	}
	if iface.GuestPCIAddress != "" {
		guest, err := parsePCIAddress(iface.GuestPCIAddress)
		if err != nil {
			return nil, fmt.Errorf("interface %q (network %q): VMI pciAddress: %w", iface.Name, iface.Network, err)
		}
		hostdev.Address = &libvirtxml.DomainAddress{PCI: guest}
	}
	if iface.BootOrder != nil {
		if *iface.BootOrder == 0 {
			return nil, fmt.Errorf("%w: interface %q (network %q): VMI bootOrder 0, want >= 1",
				ErrInvalidInterface, iface.Name, iface.Network)
		}
		hostdev.Boot = &libvirtxml.DomainDeviceBoot{Order: *iface.BootOrder}
	}
	return hostdev, nil
}

// parsePCIAddress converts "0000:65:00.2" into libvirt's PCI address; the rule (widths, slot and
// function bounds) is pkg/netval's, the same that downwardapi and model applied at the input.
func parsePCIAddress(s string) (*libvirtxml.DomainAddressPCI, error) {
	a, err := netval.ParsePCIAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPCIAddress, err)
	}
	domain, bus, slot, function := uint(a.Domain), uint(a.Bus), uint(a.Slot), uint(a.Function)
	return &libvirtxml.DomainAddressPCI{Domain: &domain, Bus: &bus, Slot: &slot, Function: &function}, nil
}
