package hooks

import (
	"context"

	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

// Handler does the work behind the Callbacks services. Implementations must be safe for concurrent
// use and must honour ctx: it is cancelled when the call's deadline passes or the server stops.
type Handler interface {
	DomainMutator
	// PreCloudInitIso returns the CloudInitData JSON to hand back, the answer's only field (v1alpha3Server
	// says why). The request's own CloudInitNoCloudSource is a copy of CloudInitData's user data and
	// networkData (manager.go preCloudInitIsoDataToJSON): it is never decoded (codec.go), so the Handler
	// gets CloudInitData alone.
	PreCloudInitIso(ctx context.Context, vmiJSON, cloudInitData []byte) (newCloudInitData []byte, err error)
}

// versions are the Callbacks versions served, newest first: virt-launcher picks the newest it knows
// (pkg/hooks/manager.go processSideCarSocket).
func versions() []string { return []string{hooksv1alpha3.Version, hooksv1alpha2.Version} }

type infoServer struct{ name string }

// Info answers at once and never touches data: virt-launcher gives it one second and aborts (the
// pod fails) on any error (manager.go processSideCarSocket).
func (s infoServer) Info(context.Context, *info.InfoParams) (*info.InfoResult, error) {
	return &info.InfoResult{Name: s.name, Versions: versions(), HookPoints: []*info.HookPoint{
		{Name: info.OnDefineDomainHookPointName}, {Name: info.PreCloudInitIsoHookPointName}, {Name: info.ShutdownHookPointName},
	}}, nil
}

// v1alpha3Server adapts the generated service to one Handler: it translates between KubeVirt's messages
// and the Handler's byte slices, nothing else.
type v1alpha3Server struct {
	handler  Handler
	shutdown func()
}

func (s v1alpha3Server) OnDefineDomain(ctx context.Context, p *hooksv1alpha3.OnDefineDomainParams) (*hooksv1alpha3.OnDefineDomainResult, error) {
	out, err := s.handler.OnDefineDomain(ctx, p.GetVmi(), p.GetDomainXML())
	if err != nil {
		return nil, err
	}
	if len(out)+answerFramingBytes > MaxAnswerBytes {
		return nil, answerTooLarge("OnDefineDomain", "domain XML", len(out))
	}
	return &hooksv1alpha3.OnDefineDomainResult{DomainXML: out}, nil
}

func (s v1alpha3Server) PreCloudInitIso(ctx context.Context, p *hooksv1alpha3.PreCloudInitIsoParams) (*hooksv1alpha3.PreCloudInitIsoResult, error) {
	data, err := s.handler.PreCloudInitIso(ctx, p.GetVmi(), p.GetCloudInitData())
	if err != nil {
		return nil, err
	}
	if len(data)+answerFramingBytes > MaxAnswerBytes {
		return nil, answerTooLarge("PreCloudInitIso", "CloudInitData", len(data))
	}
	// CloudInitNoCloudSource stays unset: KubeVirt's hook Manager reads it only as a fallback, when the
	// returned CloudInitData is not valid (kubevirt.io/kubevirt@v1.8.4 pkg/hooks/manager.go lines 334-355
	// preCloudInitIsoValidateResult, called at 392 and 414; the same in v1.9.0), valid being UserData != ""
	// and NoCloudMetaData or ConfigDriveMetaData set (pkg/cloud-init/cloud-init.go:109-111
	// IsValidCloudInitData). Ours always carries UserData (cloudinit.Input.PassThrough fills an empty one)
	// and passes KubeVirt's metadata through, so the fallback never fires (test/cloudinit checks it with
	// KubeVirt's own IsValidCloudInitData).
	return &hooksv1alpha3.PreCloudInitIsoResult{CloudInitData: data}, nil
}

// Shutdown asks the server to stop and returns at once; the stop itself waits for this call to
// finish. A second call, or one after a signal, is harmless (unlike passt's blocking channel send).
func (s v1alpha3Server) Shutdown(context.Context, *hooksv1alpha3.ShutdownParams) (*hooksv1alpha3.ShutdownResult, error) {
	s.shutdown()
	return &hooksv1alpha3.ShutdownResult{}, nil
}

// v1alpha2Server serves v1alpha2 by handing each call to the v1alpha3 server: the two versions carry the
// same fields for the hooks we serve, and v1alpha2 has no Shutdown.
type v1alpha2Server struct {
	v3 v1alpha3Server
}

func (s v1alpha2Server) OnDefineDomain(ctx context.Context, p *hooksv1alpha2.OnDefineDomainParams) (*hooksv1alpha2.OnDefineDomainResult, error) {
	res, err := s.v3.OnDefineDomain(ctx, &hooksv1alpha3.OnDefineDomainParams{Vmi: p.GetVmi(), DomainXML: p.GetDomainXML()})
	if err != nil {
		return nil, err
	}
	return &hooksv1alpha2.OnDefineDomainResult{DomainXML: res.GetDomainXML()}, nil
}

func (s v1alpha2Server) PreCloudInitIso(ctx context.Context, p *hooksv1alpha2.PreCloudInitIsoParams) (*hooksv1alpha2.PreCloudInitIsoResult, error) {
	res, err := s.v3.PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{Vmi: p.GetVmi(), CloudInitData: p.GetCloudInitData()})
	if err != nil {
		return nil, err
	}
	// CloudInitNoCloudSource stays unset, as in v1alpha3 (v1alpha3Server.PreCloudInitIso says why).
	return &hooksv1alpha2.PreCloudInitIsoResult{CloudInitData: res.GetCloudInitData()}, nil
}
