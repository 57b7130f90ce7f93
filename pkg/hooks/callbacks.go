package hooks

import (
	"context"
)

// Versions returns the Callbacks versions served, newest first: virt-launcher picks the newest it
// knows (pkg/hooks/manager.go processSideCarSocket).
func Versions() []string { return []string{versionV1alpha3, versionV1alpha2} }

// HookPoints returns the hook points the sidecar subscribes to.
func HookPoints() []string {
	return []string{hookPointOnDefineDomain, hookPointPreCloudInitIso, hookPointShutdown}
}

type infoServer struct {
	name string
}

// Info answers at once and never touches data: virt-launcher gives it one second and aborts (the
// pod fails) on any error (manager.go processSideCarSocket, kubevirt issue #1696). Its request
// (InfoParams) has no fields.
func (s infoServer) Info(context.Context, []byte) ([]byte, error) {
	return encodeInfoResult(s.name, HookPoints(), Versions()), nil
}

// v1alpha3Server serves the Callbacks methods, v1alpha3 and v1alpha2 alike, with one Handler.
type v1alpha3Server struct {
	handler  Handler
	shutdown func()
}

func (s v1alpha3Server) OnDefineDomain(ctx context.Context, msg []byte) ([]byte, error) {
	p, err := decodeDomainRequest(msg)
	if err != nil {
		return nil, grpcError(&requestError{err})
	}
	out, err := s.handler.OnDefineDomain(ctx, p.vmi, p.domainXML)
	if err != nil {
		return nil, err
	}
	if len(out)+answerFramingBytes > MaxAnswerBytes {
		return nil, answerTooLarge("OnDefineDomain", "domain XML", len(out))
	}
	return encodeBytesMessage(bytesField{fieldDomainXML, out}), nil
}

func (s v1alpha3Server) PreCloudInitIso(ctx context.Context, msg []byte) ([]byte, error) {
	p, err := decodeCloudInitRequest(msg)
	if err != nil {
		return nil, grpcError(&requestError{err})
	}
	data, source, err := s.handler.PreCloudInitIso(ctx, p.vmi, p.cloudInitData, nil)
	if err != nil {
		return nil, err
	}
	if source, err = fitAnswer("PreCloudInitIso", data, source); err != nil {
		return nil, err
	}
	return encodeBytesMessage(bytesField{fieldNoCloudSource, source}, bytesField{fieldCloudInitData, data}), nil
}

// Shutdown asks the server to stop and returns at once; the stop itself waits for this call to
// finish. A second call, or one after a signal, is harmless (unlike passt's blocking channel send).
// Its request and answer (ShutdownParams, ShutdownResult) have no fields.
func (s v1alpha3Server) Shutdown(context.Context, []byte) ([]byte, error) {
	s.shutdown()
	return nil, nil
}
