package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/pluginv1alpha1"
)

// Invocation contexts virt-launcher v1.9.0 sends in MutateDomainRequest.sidecar_context
// (kubevirt.io/api plugin/v1alpha1 types.go InvocationContext), and the one domain type it sends
// (virtwrap/plugins/sidecar.go).
const (
	InvocationContextBoot            = "Boot"
	InvocationContextMigrationTarget = "MigrationTarget"
	DomainTypeLibvirt                = "libvirt"
)

// DefaultPluginWait bounds how long a Boot MutateDomain waits for DownwardAPI data. virt-launcher v1.9.0
// gives a sidecar domain hook 30 s unless the Plugin says otherwise (virtwrap/plugins/pipeline.go
// defaultSidecarCallTimeout, pluginsv1alpha1.DefaultTimeout), less than the hook protocol's 1 min, so our
// 45 s --wait-timeout would answer after the caller gave up and lose the names of the missing items.
const DefaultPluginWait = 25 * time.Second

// DomainMutator is what the Plugin API server needs of the Handler: the same domain step OnDefineDomain runs.
type DomainMutator interface {
	// OnDefineDomain returns the domain XML to hand back to virt-launcher. virt-launcher calls it
	// several times per VM start (pkg/virt-launcher/virtwrap/manager.go allocateHotplugPorts), so
	// it must be idempotent.
	OnDefineDomain(ctx context.Context, vmiJSON, domainXML []byte) ([]byte, error)
}

// PluginConfig configures the Plugin API server.
type PluginConfig struct {
	// SocketPath is where virt-launcher dials: the Plugin's domainHooks[].sidecar.socketPath, which
	// KubeVirt requires under /var/run/kubevirt-plugin/<plugin>/ and ending .sock
	// (virtwrap/plugins/sidecar.go validateSocketPath, validatingadmissionpolicy_sidecar.go). The directory
	// must exist: it is the plugin-sockets emptyDir, mounted with subPath <plugin>.
	SocketPath string
	Mutator    DomainMutator
	// Wait bounds a Boot call's wait for data; 0 means DefaultPluginWait. A call whose own deadline is
	// sooner gets less (see pluginDeadline).
	Wait        time.Duration
	Logger      *slog.Logger
	StopTimeout time.Duration
	// Budget is the process's request budget, shared with the hook server (see Config.Budget).
	Budget *Budget
}

// NewPlugin builds a Server for KubeVirt's Plugin API DomainHookService (VEP-190, v1.9.0 Alpha, gate
// Plugins) on its own socket, beside the hook protocol's Server: same socket lifecycle, interceptors and
// stop. It has no Info: virt-launcher learns the socket from the Plugin object.
func NewPlugin(cfg PluginConfig) (*Server, error) {
	if cfg.Mutator == nil {
		return nil, errors.New("hooks: plugin server has no domain mutator")
	}
	if !filepath.IsAbs(cfg.SocketPath) || !strings.HasSuffix(cfg.SocketPath, ".sock") {
		return nil, fmt.Errorf("hooks: plugin socket %q must be an absolute path ending .sock (KubeVirt's Plugin socketPath rules)", cfg.SocketPath)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultPluginWait
	}
	dir, name := filepath.Split(filepath.Clean(cfg.SocketPath))
	return newServer(Config{
		SocketDir:   dir,
		SocketName:  name,
		Name:        "sriov-udn-binding plugin",
		Logger:      cfg.Logger,
		StopTimeout: cfg.StopTimeout,
		Budget:      cfg.Budget,
	}, func(s *Server, g *grpc.Server) {
		pluginv1alpha1.RegisterDomainHookServiceServer(g, domainHookServer{mutator: cfg.Mutator, wait: cfg.Wait, log: s.log})
	})
}

// domainHookServer adapts DomainHookService to the DomainMutator.
type domainHookServer struct {
	pluginv1alpha1.UnimplementedDomainHookServiceServer
	mutator DomainMutator
	wait    time.Duration
	log     *slog.Logger
}

// MutateDomain runs the OnDefineDomain step at Boot, which virt-launcher calls after the legacy hooks'
// OnDefineDomain on the domain they returned (virtwrap/util/libvirt_helper.go SetDomainSpecStrWithHooks):
// the step replaces our hostdevs by alias, so both paths together leave one per VF. Any other context
// (MigrationTarget: live-migration-target.go) gets the domain back unchanged at once: the target's VFs are
// KubeVirt's to re-attach (docs/design.md section 10).
func (s domainHookServer) MutateDomain(ctx context.Context, req *pluginv1alpha1.MutateDomainRequest) (*pluginv1alpha1.MutateDomainResponse, error) {
	if invocation := req.GetSidecarContext().GetInvocationContext(); invocation != InvocationContextBoot {
		s.log.Debug("domain passed through", "hook", "MutateDomain", "invocationContext", invocation)
		return &pluginv1alpha1.MutateDomainResponse{Domain: req.GetDomain()}, nil
	}
	if req.GetDomainType() != DomainTypeLibvirt {
		return nil, status.Errorf(codes.InvalidArgument, "MutateDomain: request field domain_type from virt-launcher is %q, want %q",
			req.GetDomainType(), DomainTypeLibvirt)
	}
	ctx, cancel := context.WithDeadline(ctx, pluginDeadline(ctx, time.Now(), s.wait))
	defer cancel()
	out, err := s.mutator.OnDefineDomain(ctx, req.GetVmi(), req.GetDomain())
	if err != nil {
		return nil, err
	}
	if len(out)+answerFramingBytes > MaxAnswerBytes {
		return nil, answerTooLarge("MutateDomain", "domain", len(out))
	}
	return &pluginv1alpha1.MutateDomainResponse{Domain: out}, nil
}

// pluginDeadline is when a Boot call stops waiting: wait after now, and never later than a margin before
// the caller's own deadline, so that the caller gets our error naming what is missing rather than its
// own timeout. The margin is a tenth of the time left, at most a second.
func pluginDeadline(ctx context.Context, now time.Time, wait time.Duration) time.Time {
	deadline := now.Add(wait)
	if d, ok := ctx.Deadline(); ok {
		margin := min(time.Second, d.Sub(now)/10)
		if d.Add(-margin).Before(deadline) {
			deadline = d.Add(-margin)
		}
	}
	return deadline
}
