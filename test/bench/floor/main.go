// Command floor is the memory floor of the design card's libraries: grpc-go serving KubeVirt's generated
// hook services (info, v1alpha2, v1alpha3) on a unix socket, with handlers that do nothing but answer
// (OnDefineDomain returns the domain it was given). It has none of the sidecar's own work: no DownwardAPI
// files, no cloud-init, no libvirtxml, no YAML, no logs.
//
// `make build-floor` builds it from the root module (through `go build -overlay`), with the sidecar's
// build tags, flags and module versions, so that make bench can set what any sidecar made of these
// libraries pays beside what ours pays. It is a measuring device, never shipped.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	hooksInfo "kubevirt.io/kubevirt/pkg/hooks/info"
	hooksV1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksV1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

type info struct{}

func (info) Info(context.Context, *hooksInfo.InfoParams) (*hooksInfo.InfoResult, error) {
	return &hooksInfo.InfoResult{
		Name:     "floor",
		Versions: []string{hooksV1alpha3.Version, hooksV1alpha2.Version},
		HookPoints: []*hooksInfo.HookPoint{
			{Name: hooksInfo.OnDefineDomainHookPointName, Priority: 0},
		},
	}, nil
}

type v1alpha3 struct{}

func (v1alpha3) OnDefineDomain(_ context.Context, p *hooksV1alpha3.OnDefineDomainParams) (*hooksV1alpha3.OnDefineDomainResult, error) {
	return &hooksV1alpha3.OnDefineDomainResult{DomainXML: p.GetDomainXML()}, nil
}

func (v1alpha3) PreCloudInitIso(_ context.Context, p *hooksV1alpha3.PreCloudInitIsoParams) (*hooksV1alpha3.PreCloudInitIsoResult, error) {
	return &hooksV1alpha3.PreCloudInitIsoResult{CloudInitData: p.GetCloudInitData()}, nil
}

func (v1alpha3) Shutdown(context.Context, *hooksV1alpha3.ShutdownParams) (*hooksV1alpha3.ShutdownResult, error) {
	return &hooksV1alpha3.ShutdownResult{}, nil
}

type v1alpha2 struct{}

func (v1alpha2) OnDefineDomain(_ context.Context, p *hooksV1alpha2.OnDefineDomainParams) (*hooksV1alpha2.OnDefineDomainResult, error) {
	return &hooksV1alpha2.OnDefineDomainResult{DomainXML: p.GetDomainXML()}, nil
}

func (v1alpha2) PreCloudInitIso(_ context.Context, p *hooksV1alpha2.PreCloudInitIsoParams) (*hooksV1alpha2.PreCloudInitIsoResult, error) {
	return &hooksV1alpha2.PreCloudInitIsoResult{CloudInitData: p.GetCloudInitData()}, nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: floor SOCKET")
	}
	l, err := net.Listen("unix", args[0])
	if err != nil {
		return fmt.Errorf("listen on %s: %w", args[0], err)
	}
	srv := grpc.NewServer()
	hooksInfo.RegisterInfoServer(srv, info{})
	hooksV1alpha3.RegisterCallbacksServer(srv, v1alpha3{})
	hooksV1alpha2.RegisterCallbacksServer(srv, v1alpha2{})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	if err := srv.Serve(l); err != nil {
		return fmt.Errorf("serve %s: %w", args[0], err)
	}
	return nil
}
