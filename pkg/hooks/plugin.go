package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// DefaultPluginWait bounds how long a Boot MutateDomain waits for DownwardAPI data. virt-launcher v1.9.0
// gives a sidecar domain hook 30 s unless the Plugin says otherwise (virtwrap/plugins/pipeline.go
// defaultSidecarCallTimeout, pluginsv1alpha1.DefaultTimeout), less than the hook protocol's 1 min, so our
// 45 s --wait-timeout would answer after the caller gave up and lose the names of the missing items.
const DefaultPluginWait = 25 * time.Second

// DomainMutator is what the Plugin API server needs of the Handler: the same domain step OnDefineDomain runs.
type DomainMutator interface {
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
	}, func(s *Server) map[string]method {
		return map[string]method{methodMutateDomain: domainHookServer{mutator: cfg.Mutator, wait: cfg.Wait, log: s.log}.MutateDomain}
	})
}

// domainHookServer adapts DomainHookService to the DomainMutator.
type domainHookServer struct {
	mutator DomainMutator
	wait    time.Duration
	log     *slog.Logger
}

// MutateDomain runs the OnDefineDomain step at Boot, which virt-launcher calls after the legacy hooks'
// OnDefineDomain on the domain they returned (virtwrap/util/libvirt_helper.go SetDomainSpecStrWithHooks):
// the step replaces our hostdevs by alias, so both paths together leave one per VF. Any other context
// (MigrationTarget: live-migration-target.go) gets the domain back unchanged at once: the target's VFs are
// KubeVirt's to re-attach (DESIGN.md 4b).
func (s domainHookServer) MutateDomain(ctx context.Context, msg []byte) ([]byte, error) {
	req, err := decodeMutateRequest(msg)
	if err != nil {
		return nil, grpcError(&requestError{err})
	}
	if req.invocationContext != InvocationContextBoot {
		s.log.Debug("domain passed through", "hook", "MutateDomain", "invocationContext", req.invocationContext)
		return encodeBytesMessage(bytesField{fieldMutateResponseDomain, req.domain}), nil
	}
	if req.domainType != DomainTypeLibvirt {
		return nil, grpcError(&pipeline.Error{Hook: "MutateDomain", Kind: pipeline.InvalidInput,
			Err: fmt.Errorf("request field domain_type from virt-launcher is %q, want %q", req.domainType, DomainTypeLibvirt)})
	}
	ctx, cancel := context.WithDeadline(ctx, pluginDeadline(ctx, time.Now(), s.wait))
	defer cancel()
	out, err := s.mutator.OnDefineDomain(ctx, req.vmi, req.domain)
	if err != nil {
		return nil, err
	}
	return encodeBytesMessage(bytesField{fieldMutateResponseDomain, out}), nil
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
