package pipeline

import (
	"context"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The steps of one call, each on a fresh Call, for the tests of one step at a time.

func ParseDomain(ctx context.Context, vmi *model.VirtualMachineInstance, opts model.Options, domainXML []byte) (*domain.Document, error) {
	return NewCall(vmi, opts).parseDomain(ctx, domainXML)
}

func DomainNeed(vmi *model.VirtualMachineInstance, opts model.Options, doc *domain.Document) (Need, error) {
	return NewCall(vmi, opts).domainNeed(doc)
}

func CloudInitNeed(vmi *model.VirtualMachineInstance, opts model.Options) Need {
	return NewCall(vmi, opts).cloudInitNeed()
}

func Domain(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options, domainXML []byte, doc *domain.Document) ([]byte, []Warning, error) {
	return NewCall(vmi, opts).domain(snap, domainXML, doc)
}

func CloudInit(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options, cloudInitData []byte) (data []byte, warnings []Warning, err error) {
	res, warnings, err := NewCall(vmi, opts).cloudInit(snap, cloudInitData)
	if err != nil {
		return nil, nil, err
	}
	return res.Data, warnings, nil
}
