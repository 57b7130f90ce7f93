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
func WiredByKubeVirt(domainXML []byte, ifaceName string) (bool, error) {
	if err := validateIfaceName(ifaceName); err != nil {
		return false, err
	}
	doc, err := parseDocument(context.Background(), domainXML)
	if err != nil {
		return false, err
	}
	return doc.wiredByKubeVirt(ifaceName), nil
}

func (doc *document) wiredByKubeVirt(ifaceName string) bool {
	if doc.devices == nil {
		return false
	}
	return slices.ContainsFunc(doc.devices.children, func(d device) bool {
		return d.element == "interface" && d.alias == interfaceAlias(ifaceName)
	})
}

// Apply returns domainXML with one <hostdev> per bound interface that needs one, replacing any
// previous one with the same alias; interfaces KubeVirt already wired (<interface> alias ua-<name>)
// are skipped. virt-launcher calls OnDefineDomain several times per start and feeds each call the
// previous result (pkg/virt-launcher/virtwrap/util/libvirt_helper.go, SetDomainSpecStrWithHooks), so
// Apply is idempotent. Every byte outside the replaced hostdevs is kept: the new ones go after the
// last other device, indented like it. When nothing changes the result is domainXML itself.
func Apply(domainXML []byte, ifaces []model.BoundInterface) ([]byte, error) {
	doc, err := parseDocument(context.Background(), domainXML)
	if err != nil {
		return nil, err
	}
	return doc.apply(domainXML, ifaces)
}

// apply is Apply on a parsed document; src is the document's source.
func (doc *document) apply(domainXML []byte, ifaces []model.BoundInterface) ([]byte, error) {

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
		return domainXML, nil
	}
	if doc.devices == nil {
		return nil, fmt.Errorf("%w: no <devices> element to add hostdevs for interface %q to", ErrMalformedDomain, needed[0].Name)
	}

	aliases := make(map[string]string, len(needed))            // hostdev alias -> interface name
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
		aliases[HostdevAlias(iface.Name)] = iface.Name
		hostdevs = append(hostdevs, hostdevXML{name: iface.Name, hostdev: hd})
	}
	return splice(domainXML, doc.devices, hostdevs, aliases)
}

// splice removes every child of <devices> that is a hostdev with one of the given aliases (with the
// whitespace before it) and inserts the new hostdevs after the last remaining device.
func splice(src []byte, devs *devicesElement, hostdevs []hostdevXML, aliases map[string]string) ([]byte, error) {
	var (
		cuts []edit
		kept []device
	)
	for _, d := range devs.children {
		owner, ours := aliases[d.alias]
		switch {
		case ours && d.element == "hostdev":
			cuts = append(cuts, edit{start: d.leadStart, end: d.end})
		case ours:
			// libvirt rejects duplicate aliases, and KubeVirt's NetStat would report this device as
			// our interface: refuse rather than define a domain that fails or misreports.
			return nil, fmt.Errorf("%w: interface %q: the domain already has a <%s> with alias %q",
				ErrAliasConflict, owner, d.element, d.alias)
		default:
			kept = append(kept, d)
		}
	}

	l := newLayout(devs, kept)
	insert, err := l.render(hostdevs)
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

	edits := []edit{{start: l.insertAt, end: l.insertAt, text: insert}}
	if l.closingLead != "" && !strings.Contains(survivingText(src, l.insertAt, devs.endTagStart, cuts), "\n") {
		// Nothing left between the new hostdevs and </devices> ends the line: end it ourselves.
		edits = append(edits, edit{start: devs.endTagStart, end: devs.endTagStart, text: l.closingLead})
	}
	return applyEdits(src, append(edits, cuts...)), nil
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
	l.unit = devIndent // <devices> is one level below <domain>
	if l.unit == "" {
		l.unit = "  "
	}
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
		var (
			raw []byte
			err error
		)
		if l.indented {
			raw, err = xml.MarshalIndent(hd.hostdev, l.childIndent, l.unit)
			b.WriteString("\n")
		} else {
			raw, err = xml.Marshal(hd.hostdev)
		}
		if err != nil {
			return "", fmt.Errorf("interface %q: marshal hostdev: %w", hd.name, err)
		}
		b.Write(raw)
	}
	return b.String(), nil
}
