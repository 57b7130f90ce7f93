package domain

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// device is one direct child element of <devices>, located by byte offsets in the source document.
type device struct {
	element string // local name: "hostdev", "interface", ...
	alias   string // name attribute of its first direct <alias> child; "" when absent
	// leadStart is where the whitespace-only text directly before the element starts (== start when
	// there is none): removing [leadStart, end) removes the element together with its indentation.
	leadStart, start, end int
	lead                  string // that whitespace, raw
}

// devicesElement is the single <devices> child of <domain>.
type devicesElement struct {
	startTagStart, startTagEnd int
	endTagStart                int
	selfClosing                bool   // <devices/>: decoder reports a zero-length end tag
	lead                       string // raw whitespace-only text directly before <devices>
	children                   []device
}

// Document is a domain XML parsed once for several questions and one Apply: parsing it once per bound
// interface and again to apply costs time quadratic in the domain's size with hundreds of interfaces.
type Document struct {
	src     []byte
	devices *devicesElement // nil when the domain has no <devices>
}

// MaxDepth bounds element nesting in a domain (libvirt's own documents are about 8 deep).
const MaxDepth = 64

// ctxCheckTokens is how often Parse looks at its context: a 4 MiB domain is about 300,000
// tokens and 100 ms of CPU, so a call whose client has gone stops within a fraction of a millisecond.
const ctxCheckTokens = 1024

// Parse checks that src is one well-formed <domain> document and locates <devices> and its children;
// it stops, with ctx's error wrapped, when ctx ends. It reads tokens with encoding/xml and records byte
// offsets instead of unmarshalling, so that Apply can splice bytes without re-serialising (and so
// losing) anything libvirtxml or KubeVirt's api.DomainSpec do not model.
func Parse(ctx context.Context, src []byte) (*Document, error) {
	dec := xml.NewDecoder(bytes.NewReader(src))
	dec.Strict = true

	var (
		doc       = Document{src: src}
		depth     int  // element nesting depth after the last token
		rootSeen  bool // the root element has been opened
		inDevices bool
		child     *device // the open direct child of <devices>, if any
		// leadStart/leadEnd delimit the last token if it was whitespace-only text, else leadEnd < 0.
		leadStart, leadEnd = 0, -1
	)
	for tokens := 1; ; tokens++ {
		if tokens%ctxCheckTokens == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("parsing the domain XML stopped at byte %d: %w", dec.InputOffset(), err)
			}
		}
		start := int(dec.InputOffset())
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformedDomain, err)
		}
		end := int(dec.InputOffset())
		prevLeadStart, prevLeadEnd := leadStart, leadEnd
		leadEnd = -1

		switch t := tok.(type) {
		case xml.StartElement:
			switch {
			case depth == 0 && rootSeen:
				return nil, fmt.Errorf("%w: second root element <%s> at byte %d", ErrMalformedDomain, t.Name.Local, start)
			case depth == 0:
				if t.Name.Space != "" || t.Name.Local != "domain" {
					return nil, fmt.Errorf("%w: root element is <%s>, want <domain>", ErrMalformedDomain, qualified(t.Name))
				}
				rootSeen = true
			case depth == 1 && isLibvirt(t.Name, "devices"):
				if doc.devices != nil {
					return nil, fmt.Errorf("%w: second <devices> element at byte %d", ErrMalformedDomain, start)
				}
				doc.devices = &devicesElement{startTagStart: start, startTagEnd: end}
				if prevLeadEnd == start {
					doc.devices.lead = string(src[prevLeadStart:prevLeadEnd])
				}
				inDevices = true
			case depth == 2 && inDevices:
				child = &device{element: t.Name.Local, leadStart: start, start: start}
				if t.Name.Space != "" {
					// A namespaced element is never a libvirt device: keep it, match nothing.
					child.element = qualified(t.Name)
				}
				if prevLeadEnd == start {
					child.leadStart = prevLeadStart
					child.lead = string(src[prevLeadStart:prevLeadEnd])
				}
			case depth == 3 && child != nil && isLibvirt(t.Name, "alias") && child.alias == "":
				child.alias = attr(t, "name")
			}
			if depth++; depth > MaxDepth {
				// encoding/xml keeps a stack entry per open element: refuse before that grows.
				return nil, fmt.Errorf("%w: nesting depth exceeds %d at byte %d", ErrMalformedDomain, MaxDepth, start)
			}
		case xml.EndElement:
			depth--
			switch {
			case depth == 2 && child != nil:
				child.end = end
				doc.devices.children = append(doc.devices.children, *child)
				child = nil
			case depth == 1 && inDevices:
				doc.devices.endTagStart = start
				doc.devices.selfClosing = start == end
				inDevices = false
			}
		case xml.CharData:
			if depth == 0 && !isSpace(src[start:end]) {
				return nil, fmt.Errorf("%w: text outside the <domain> element at byte %d", ErrMalformedDomain, start)
			}
			if isSpace(src[start:end]) {
				leadStart, leadEnd = start, end
			}
		case xml.Directive:
			// libvirt never emits a DOCTYPE; one could declare entities that other parsers expand.
			return nil, fmt.Errorf("%w: directive %.40q at byte %d is not allowed", ErrMalformedDomain, t, start)
		}
	}
	if !rootSeen {
		return nil, fmt.Errorf("%w: no <domain> element", ErrMalformedDomain)
	}
	return &doc, nil
}

// isLibvirt reports whether name is the un-namespaced libvirt element local.
func isLibvirt(name xml.Name, local string) bool {
	return name.Space == "" && name.Local == local
}

func qualified(name xml.Name) string {
	if name.Space == "" {
		return name.Local
	}
	return name.Space + ":" + name.Local
}

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Space == "" && a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// isSpace reports whether raw is XML whitespace only (the XML 1.0 S production).
func isSpace(raw []byte) bool { return len(bytes.Trim(raw, " \t\r\n")) == 0 }

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
