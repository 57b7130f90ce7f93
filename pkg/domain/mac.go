package domain

import (
	"context"
	"fmt"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
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
func SetPodNICMAC(domainXML []byte, ifaceName string, mac netval.MAC) ([]byte, PodNICMAC, error) {
	var res PodNICMAC
	if err := validateIfaceName(ifaceName); err != nil {
		return nil, res, err
	}
	if mac.IsZero() {
		return nil, res, fmt.Errorf("%w: interface %q: no MAC to set", ErrInvalidInterface, ifaceName)
	}
	doc, err := Parse(context.Background(), domainXML)
	if err != nil {
		return nil, res, err
	}
	el, d, found, err := doc.podNIC(ifaceName)
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
	text := "<mac address='" + mac.String() + "'/>"
	if el.firstIndent != "" {
		// Indent like the element's first child: repeat the whitespace that follows the start tag.
		insert += len(el.firstIndent)
		text += el.firstIndent
	}
	res.Set = true
	return applyEdits(domainXML, []edit{{start: insert, end: insert, text: text}}), res, nil
}

// PodNICMAC reports, without changing anything, what SetPodNICMAC would find: whether the <interface>
// aliased ua-<ifaceName> exists and the MAC it has.
func (doc *Document) PodNICMAC(ifaceName string) (PodNICMAC, error) {
	var res PodNICMAC
	if err := validateIfaceName(ifaceName); err != nil {
		return res, err
	}
	el, _, found, err := doc.podNIC(ifaceName)
	if err != nil || !found {
		return res, err
	}
	res.Found, res.Existing = true, el.mac
	return res, nil
}

// podNIC finds the <interface> aliased ua-<ifaceName> and reads its start tag and <mac>.
func (doc *Document) podNIC(ifaceName string) (interfaceElement, device, bool, error) {
	if doc.devices == nil {
		return interfaceElement{}, device{}, false, nil
	}
	alias := interfaceAlias(ifaceName)
	for _, d := range doc.devices.children {
		if d.element != "interface" || d.alias != alias {
			continue
		}
		el, err := scanInterface(doc.src[d.start:d.end])
		if err != nil {
			return el, d, true, fmt.Errorf("%w: <interface> %s: %w", ErrMalformedDomain, alias, err)
		}
		return el, d, true, nil
	}
	return interfaceElement{}, device{}, false, nil
}
