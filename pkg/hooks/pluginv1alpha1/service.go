package pluginv1alpha1

import (
	"context"

	"google.golang.org/grpc"
)

// ServiceName is the gRPC service KubeVirt's virt-launcher calls (kubevirt.io/kubevirt v1.9.0
// pkg/hooks/plugins/v1alpha1/api.proto: package kubevirt.hooks.plugins.v1alpha1, service DomainHookService).
// The method path is all that identifies the service on the wire.
const ServiceName = "kubevirt.hooks.plugins.v1alpha1.DomainHookService"

// MutateDomainMethod is the full gRPC method path of MutateDomain.
const MutateDomainMethod = "/" + ServiceName + "/MutateDomain"

// Invocation contexts virt-launcher sends in SidecarContext (kubevirt.io/api v1.9.0 plugin/v1alpha1
// types.go InvocationContext).
const (
	InvocationContextBoot            = "Boot"
	InvocationContextMigrationTarget = "MigrationTarget"
)

// DomainTypeLibvirt is the only domain type virt-launcher v1.9.0 sends (virtwrap/plugins/sidecar.go).
const DomainTypeLibvirt = "libvirt"

// DomainHookServer is the server side of DomainHookService.
type DomainHookServer interface {
	MutateDomain(context.Context, *MutateDomainRequest) (*MutateDomainResponse, error)
}

// RegisterDomainHookServer registers srv on s under KubeVirt's service name.
func RegisterDomainHookServer(s grpc.ServiceRegistrar, srv DomainHookServer) {
	s.RegisterService(&serviceDesc, srv)
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*DomainHookServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "MutateDomain",
		Handler:    mutateDomainHandler,
	}},
	Streams:  []grpc.StreamDesc{},
	Metadata: "pkg/hooks/pluginv1alpha1/api.proto",
}

func mutateDomainHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(MutateDomainRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(DomainHookServer).MutateDomain(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: MutateDomainMethod}
	handler := func(ctx context.Context, req any) (any, error) {
		return srv.(DomainHookServer).MutateDomain(ctx, req.(*MutateDomainRequest))
	}
	return interceptor(ctx, in, info, handler)
}
