package hooks

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/pluginv1alpha1"
)

// countingMutator appends a marker to the domain and counts its calls; a ctx that ends first wins.
type countingMutator struct {
	calls atomic.Int32
	block bool // wait for ctx instead of answering
}

func (m *countingMutator) OnDefineDomain(ctx context.Context, _, domainXML []byte) ([]byte, error) {
	m.calls.Add(1)
	if m.block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return append(append([]byte{}, domainXML...), "<!--mutated-->"...), nil
}

func startPlugin(t *testing.T, m DomainMutator, wait time.Duration) *grpc.ClientConn {
	t.Helper()
	srv, err := NewPlugin(PluginConfig{SocketPath: filepath.Join(shortTempDir(t), "p.sock"), Mutator: m, Wait: wait, StopTimeout: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, srv.Listen())
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	conn, err := grpc.NewClient("unix://"+srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		require.NoError(t, <-done)
	})
	return conn
}

// mutate calls MutateDomain with domain "<domain/>" and VMI "{}" through the generated client; test/plugin
// drives the same server with KubeVirt v1.9.0's own client (ApplyDomainHooks).
func mutate(ctx context.Context, conn *grpc.ClientConn, domainType, invocation string) ([]byte, error) {
	res, err := pluginv1alpha1.NewDomainHookServiceClient(conn).MutateDomain(ctx, &pluginv1alpha1.MutateDomainRequest{
		DomainType:     domainType,
		Domain:         []byte("<domain/>"),
		Vmi:            []byte("{}"),
		SidecarContext: &pluginv1alpha1.SidecarContext{InvocationContext: invocation},
	})
	return res.GetDomain(), err
}

func TestMutateDomain_BootRunsTheDomainStep_OtherContextsEcho(t *testing.T) {
	for _, tc := range []struct {
		name, invocation string
		want             string
		calls            int32
	}{
		{"boot", InvocationContextBoot, "<domain/><!--mutated-->", 1},
		{"migration target", InvocationContextMigrationTarget, "<domain/>", 0},
		{"unknown context", "PreBoot", "<domain/>", 0},
		{"no context", "", "<domain/>", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &countingMutator{}
			res, err := mutate(context.Background(), startPlugin(t, m, 0), DomainTypeLibvirt, tc.invocation)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(res))
			assert.Equal(t, tc.calls, m.calls.Load())
		})
	}
}

func TestMutateDomain_OtherDomainType_InvalidArgumentNamingTheField(t *testing.T) {
	m := &countingMutator{}
	_, err := mutate(context.Background(), startPlugin(t, m, 0), "qemu", InvocationContextBoot)
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), `domain_type from virt-launcher is "qemu"`)
	assert.Zero(t, m.calls.Load())
}

func TestMutateDomain_AnswersBeforeTheCallersDeadline(t *testing.T) {
	m := &countingMutator{block: true}
	conn := startPlugin(t, m, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := mutate(ctx, conn, DomainTypeLibvirt, InvocationContextBoot)
	require.Error(t, err)
	// The server's own deadline fired (the handler's status), not the client's: the client's ctx is alive.
	require.NoError(t, ctx.Err(), "the answer came after the caller's deadline")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestPluginDeadline(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		caller   time.Duration // 0: no deadline
		wait     time.Duration
		expected time.Duration
	}{
		{"no caller deadline: the wait", 0, 25 * time.Second, 25 * time.Second},
		{"KubeVirt's 30 s default: the wait is sooner", 30 * time.Second, 25 * time.Second, 25 * time.Second},
		{"caller sooner than the wait: a second before it", 20 * time.Second, 25 * time.Second, 19 * time.Second},
		{"short caller deadline: a tenth before it", 2 * time.Second, 25 * time.Second, 1800 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.caller))
				defer cancel()
			}
			assert.Equal(t, now.Add(tc.expected), pluginDeadline(ctx, now, tc.wait))
		})
	}
}

func TestNewPlugin_RefusesSocketPathsKubeVirtRefuses(t *testing.T) {
	for _, p := range []string{"", "relative/p.sock", "/var/run/kubevirt-plugin/x/p.socket"} {
		_, err := NewPlugin(PluginConfig{SocketPath: p, Mutator: &countingMutator{}})
		assert.Error(t, err, p)
	}
	_, err := NewPlugin(PluginConfig{SocketPath: "/var/run/kubevirt-plugin/x/p.sock"})
	assert.Error(t, err, "no mutator")
}
