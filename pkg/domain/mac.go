package domain

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// PodNICMAC says what the domain does with the pod-network NIC's MAC.
type PodNICMAC struct {
	// Found is false when the domain has no <interface> aliased ua-<name> (not wired yet, or by
	// another sidecar that runs after us).
	Found bool
	// Existing is the MAC the <interface> had ("" when none).
	Existing string
	// Set says that the domain was given the wanted MAC because the interface had none.
	Set bool
}

// SetPodNICMAC gives the <interface> aliased ua-<ifaceName> the MAC mac when it has none, and leaves an
// existing MAC alone: with masquerade and bridge KubeVirt writes the pod interface's MAC there before
// OnDefineDomain (v1.8 pkg/network/domainspec/generators.go), the MAC that OVN's port security expects with
// bridge. Without a <mac>, libvirt makes one up at define time, which the guest's cloud-init config, built
// earlier in PreCloudInitIso, could not match. Every other byte is kept.
func SetPodNICMAC(domainXML []byte, ifaceName string, mac net.HardwareAddr) ([]byte, PodNICMAC, error) {
	var res PodNICMAC
	if err := validateIfaceName(ifaceName); err != nil {
		return nil, res, err
	}
	if len(mac) != 6 {
		return nil, res, fmt.Errorf("%w: interface %q: MAC %q is not 48-bit", ErrInvalidInterface, ifaceName, mac.String())
	}
	doc, err := parseDocument(context.Background(), domainXML)
	if err != nil {
		return nil, res, err
	}
	el, d, found, err := doc.podNIC(domainXML, ifaceName)
	if err != nil {
		return nil, res, err
	}
	if !found {
		return domainXML, res, nil
	}
	res.Found = true
	if el.hasMAC {
		res.Existing = el.mac
		return domainXML, res, nil
	}
	insert := d.start + el.startTagEnd
	text := "<mac address='" + strings.ToLower(mac.String()) + "'/>"
	if el.firstIndent != "" {
		// Indent like the element's first child: repeat the whitespace that follows the start tag.
		insert += len(el.firstIndent)
		text += el.firstIndent
	}
	out := make([]byte, 0, len(domainXML)+len(text))
	out = append(out, domainXML[:insert]...)
	out = append(out, text...)
	out = append(out, domainXML[insert:]...)
	res.Set = true
	return out, res, nil
}

// PodNICMAC reports, without changing anything, what SetPodNICMAC would find: whether the <interface>
// aliased ua-<ifaceName> exists and the MAC it has.
func (d *Document) PodNICMAC(ifaceName string) (PodNICMAC, error) {
	var res PodNICMAC
	if err := validateIfaceName(ifaceName); err != nil {
		return res, err
	}
	el, _, found, err := d.doc.podNIC(d.src, ifaceName)
	if err != nil || !found {
		return res, err
	}
	res.Found, res.Existing = true, el.mac
	return res, nil
}

// podNIC finds the <interface> aliased ua-<ifaceName> and reads its start tag and <mac>.
func (doc *document) podNIC(src []byte, ifaceName string) (interfaceElement, device, bool, error) {
	if doc.devices == nil {
		return interfaceElement{}, device{}, false, nil
	}
	alias := interfaceAlias(ifaceName)
	for _, d := range doc.devices.children {
		if d.element != "interface" || d.alias != alias {
			continue
		}
		el, err := scanInterface(src[d.start:d.end])
		if err != nil {
			return el, d, true, fmt.Errorf("%w: <interface> %s: %w", ErrMalformedDomain, alias, err)
		}
		return el, d, true, nil
	}
	return interfaceElement{}, device{}, false, nil
}

// interfaceElement is what SetPodNICMAC needs to know of one <interface> element.
type interfaceElement struct {
	startTagEnd int    // offset just after the start tag
	firstIndent string // whitespace-only text right after the start tag ("" when none)
	hasMAC      bool   // a direct <mac> child exists
	mac         string // its address attribute
}

func scanInterface(src []byte) (interfaceElement, error) {
	var el interfaceElement
	dec := xml.NewDecoder(bytes.NewReader(src))
	dec.Strict = true
	depth := 0
	for {
		start := int(dec.InputOffset())
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return el, nil
		}
		if err != nil {
			return el, err
		}
		end := int(dec.InputOffset())
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				el.startTagEnd = end
				if src[end-2] == '/' { // <interface .../>: no room for a child without rewriting the tag
					return el, errors.New("self-closing element")
				}
			}
			if depth == 1 && isLibvirt(t.Name, "mac") && !el.hasMAC {
				el.hasMAC, el.mac = true, attr(t, "address")
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 1 && start == el.startTagEnd && isSpace(src[start:end]) {
				el.firstIndent = string(src[start:end])
			}
		}
	}
}
