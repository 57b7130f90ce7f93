package domain

import (
	"context"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Document is a domain XML parsed once for several questions and one Apply: parsing it once per bound
// interface and again to apply costs time quadratic in the domain's size with hundreds of interfaces.
type Document struct {
	src []byte
	doc *document
}

// Parse checks domainXML as Apply does and locates its devices. It stops, with ctx's error
// wrapped, when ctx ends.
func Parse(ctx context.Context, domainXML []byte) (*Document, error) {
	doc, err := parseDocument(ctx, domainXML)
	if err != nil {
		return nil, err
	}
	return &Document{src: domainXML, doc: doc}, nil
}

// WiredByKubeVirt is the package-level WiredByKubeVirt on the parsed document.
func (d *Document) WiredByKubeVirt(ifaceName string) (bool, error) {
	if err := validateIfaceName(ifaceName); err != nil {
		return false, err
	}
	return d.doc.wiredByKubeVirt(ifaceName), nil
}

// Apply is the package-level Apply on the parsed document, without parsing it again.
func (d *Document) Apply(ifaces []model.BoundInterface) ([]byte, error) {
	return d.doc.apply(d.src, ifaces)
}

// MaxDepth bounds element nesting in a domain (libvirt's own documents are about 8 deep).
const MaxDepth = 64
