package hooks

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

// Each test here crosses one of the limits grpc-go leaves to the server (serverOptions), with a raw HTTP/2
// peer where grpc-go's own client could not misbehave, at sizes and times small enough for -race.
// test/hostile runs the same categories against the built binary at its real limits, measuring its memory.

const (
	methodInfo = "/kubevirt.hooks.info.Info/Info"
	methodPre  = "/kubevirt.hooks.v1alpha3.Callbacks/PreCloudInitIso"
)

type transport struct {
	srv    *Server
	budget *Budget
	logs   *syncBuffer
	limits Limits
}

// startTransport serves h with limits adjusted by adjust (on small sizes) and returns the server, its
// budget and its log.
func startTransport(t *testing.T, h Handler, adjust func(*Limits)) *transport {
	t.Helper()
	l := DefaultLimits()
	l.RequestBytes, l.CloudInitDecodeBytes, l.DecodeBytes = 1<<20, 512<<10, 512<<10
	l.BudgetBytes = l.StreamReserve() + 512<<10 // as DefaultLimits: one stream at its costliest, and a little beside it
	l.Handshake = 500 * time.Millisecond
	if adjust != nil {
		adjust(&l)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	budget := NewBudget(l, logger)
	srv, err := New(Config{SocketDir: shortTempDir(t), SocketName: "t.sock", Name: "sriov-udn-binding", Handler: h,
		StopTimeout: 2 * time.Second, Logger: logger, Budget: budget, limits: &l})
	require.NoError(t, err)
	require.NoError(t, srv.Listen())
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Stop()
		require.NoError(t, <-done)
	})
	return &transport{srv: srv, budget: budget, logs: logs, limits: l}
}

// info calls Info on a connection of its own, as virt-launcher's manager does, within timeout.
func (tr *transport) info(timeout time.Duration) error {
	conn, err := grpc.NewClient("unix://"+tr.srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = info.NewInfoClient(conn).Info(ctx, &info.InfoParams{})
	return err
}

func (tr *transport) heldBecomes(t *testing.T, cond func(int64) bool, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(tr.budget.Held()) }, 5*time.Second, time.Millisecond, "%s (held %d)", what, tr.budget.Held())
}

func TestBudget_PartlyReceivedRequest_HoldsItsShare_NextCallRefused_UntilTheStreamEnds(t *testing.T) {
	tr := startTransport(t, PassThrough{}, nil)
	p := dialRaw(t, tr.srv.Path())
	p.call(1, methodPre)
	p.send(1, append(prefix(uint32(tr.limits.RequestBytes)), make([]byte, 1000)...), false) // announced whole, 1000 bytes sent
	tr.heldBecomes(t, func(n int64) bool { return n == tr.limits.StreamReserve() }, "the stream reserved the costliest request")

	err := tr.info(2 * time.Second)
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "budget")
	assert.Contains(t, tr.logs.String(), "request budget full")

	p.reset(1)
	tr.heldBecomes(t, func(n int64) bool { return n == 0 }, "the reset stream's share came back")
	require.NoError(t, tr.info(2*time.Second))
	assert.Contains(t, tr.logs.String(), `"refused":1`, "the refusals are counted when the budget has room again")
}

func TestBudget_RequestNotArrivingInTime_StreamCancelled_ShareFreed(t *testing.T) {
	tr := startTransport(t, PassThrough{}, func(l *Limits) { l.ReceiveTimeout = 200 * time.Millisecond })
	p := dialRaw(t, tr.srv.Path())
	p.call(1, methodPre)
	p.send(1, prefix(100), false) // and never the 100 bytes
	var rst http2.ErrCode
	var grpcStatus string
	require.NoError(t, p.until(5*time.Second, streamEnd(1, &rst, &grpcStatus)), "the server never ended the stream")
	tr.heldBecomes(t, func(n int64) bool { return n == 0 }, "the cancelled stream's share came back")
	assert.Contains(t, tr.logs.String(), "did not arrive within 200ms")
	require.NoError(t, tr.info(2*time.Second))
}

type waitingHandler struct {
	PassThrough
	entered chan struct{}
}

func (h waitingHandler) PreCloudInitIso(ctx context.Context, _, _ []byte) ([]byte, error) {
	close(h.entered)
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// A call whose request has arrived holds only its size: Info is served while a hook waits for data.
func TestBudget_HookWaitingForData_HoldsOnlyItsRequest_InfoServed(t *testing.T) {
	h := waitingHandler{entered: make(chan struct{})}
	tr := startTransport(t, h, nil)
	conn, err := grpc.NewClient("unix://"+tr.srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: make([]byte, 300<<10)})
	})
	<-h.entered
	assert.Less(t, tr.budget.Held(), int64(400<<10), "the waiting call holds its request, not the largest one")
	require.NoError(t, tr.info(2*time.Second))
	cancel()
	wg.Wait()
	tr.heldBecomes(t, func(n int64) bool { return n == 0 }, "every share came back")
}

// The budget returns to zero after calls of every outcome: answered, failed, panicked, refused by size,
// cancelled by the client.
func TestBudget_BackToZero_AfterCallsOfEveryOutcome(t *testing.T) {
	tr := startTransport(t, panicHandler{}, func(l *Limits) { l.CloudInitDecodeBytes, l.DecodeBytes = 64<<10, 64<<10 })
	require.Greater(t, tr.limits.BudgetBytes, int64(tr.limits.RequestBytes), "precondition")
	conn, err := grpc.NewClient("unix://"+tr.srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	client := hooksv1alpha3.NewCallbacksClient(conn)
	ctx := context.Background()

	_, err = client.PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte("{}")})
	assert.NoError(t, err, "answered")
	_, err = client.OnDefineDomain(ctx, &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>")})
	assert.Equal(t, codes.Internal, status.Code(err), "panicked")
	_, err = client.PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: make([]byte, 100<<10)})
	assert.Contains(t, status.Convert(err).Message(), "the sidecar decodes", "past the decode limit")
	_, err = client.PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: make([]byte, 2<<20)})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "past the receive limit")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = client.PreCloudInitIso(cctx, &hooksv1alpha3.PreCloudInitIsoParams{})
	assert.Equal(t, codes.Canceled, status.Code(err))
	tr.heldBecomes(t, func(n int64) bool { return n == 0 }, "every share came back")
}

func TestTransport_StreamsPastMaxConcurrentStreams_Refused(t *testing.T) {
	tr := startTransport(t, PassThrough{}, func(l *Limits) { l.BudgetBytes = 1 << 40 })
	p := dialRaw(t, tr.srv.Path())
	const streams = 20
	for i := range streams {
		p.call(uint32(2*i+1), methodPre) // headers only: each stays open
	}
	refused := 0
	err := p.until(5*time.Second, func(f http2.Frame) bool {
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.ErrCode == http2.ErrCodeRefusedStream {
			refused++
		}
		return refused == streams-int(tr.limits.StreamsPerConnection)
	})
	require.NoError(t, err, "refused %d", refused)
	require.NoError(t, tr.info(2*time.Second), "other connections are served")
}

func TestTransport_HeaderListPastTheLimit_StreamRefused_ServerServes(t *testing.T) {
	tr := startTransport(t, PassThrough{}, nil)
	p := dialRaw(t, tr.srv.Path())
	p.mu.Lock()
	p.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", methodInfo}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"x-big", strings.Repeat("a", int(tr.limits.HeaderListBytes))}} {
		require.NoError(t, p.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	block := append([]byte(nil), p.hbuf.Bytes()...)
	require.Greater(t, len(block), 4<<10, "precondition: the block needs CONTINUATION frames")
	require.NoError(t, p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:4<<10], EndStream: true}))
	require.NoError(t, p.fr.WriteContinuation(1, true, block[4<<10:]))
	p.mu.Unlock()
	rst := http2.ErrCodeNo
	var grpcStatus string
	err := p.until(5*time.Second, streamEnd(1, &rst, &grpcStatus))
	if err != nil {
		require.ErrorIs(t, err, errClosed, "the stream or the connection ends")
	}
	served := rst == http2.ErrCodeNo && strings.HasPrefix(grpcStatus, "200 0 ")
	assert.False(t, err == nil && served, "a call with a header list past the limit was served: %q", grpcStatus)
	assert.True(t, err != nil || rst != http2.ErrCodeNo || grpcStatus != "", "precondition: the stream's end was seen")
	require.NoError(t, tr.info(2*time.Second))
}

func TestTransport_PingFlood_ConnectionClosedWithTooManyPings(t *testing.T) {
	tr := startTransport(t, PassThrough{}, nil)
	p := dialRaw(t, tr.srv.Path())
	for i := range 10 {
		p.ping(uint64(i))
	}
	var goAway *http2.GoAwayFrame
	err := p.until(5*time.Second, func(f http2.Frame) bool {
		goAway, _ = f.(*http2.GoAwayFrame)
		return goAway != nil
	})
	require.NoError(t, err)
	assert.Equal(t, http2.ErrCodeEnhanceYourCalm, goAway.ErrCode)
	assert.Equal(t, "too_many_pings", string(goAway.DebugData()))
	require.NoError(t, tr.info(2*time.Second))
}

func TestTransport_IdleAndSilentConnections_Closed(t *testing.T) {
	tr := startTransport(t, PassThrough{}, func(l *Limits) { l.ConnectionIdle = 300 * time.Millisecond })
	idle := dialRaw(t, tr.srv.Path())
	err := idle.until(5*time.Second, func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	require.NoError(t, err, "an idle connection is told to go away")

	silent, err := net.Dial("unix", tr.srv.Path())
	require.NoError(t, err)
	defer func() { _ = silent.Close() }()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = silent.Read(make([]byte, 64<<10)) // the server's SETTINGS, then EOF at the handshake timeout
	for err == nil {
		_, err = silent.Read(make([]byte, 64<<10))
	}
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "a silent connection was kept past the handshake timeout")
}

func TestTransport_ConnectionsPastTheCap_WaitUntilOneCloses(t *testing.T) {
	tr := startTransport(t, PassThrough{}, func(l *Limits) { l.Connections = 2 })
	held := []*rawPeer{dialRaw(t, tr.srv.Path()), dialRaw(t, tr.srv.Path())}
	for _, p := range held {
		require.NoError(t, p.until(5*time.Second, func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok }),
			"precondition: the held connections were accepted")
	}
	assert.Error(t, tr.info(500*time.Millisecond), "a third connection was served while two were open")
	_ = held[0].conn.Close()
	require.NoError(t, tr.info(5*time.Second), "served once a connection closed")
}

// The connection slots belong to the process, not to a socket: connections held on the hook socket keep the
// Plugin API socket's next one waiting too, until one of them closes (what netutil.LimitListener, whose
// slots are its listener's own, cannot do).
func TestBudget_ConnectionSlots_SharedByEverySocket(t *testing.T) {
	l := DefaultLimits()
	l.Connections = 2
	b := NewBudget(l, slog.New(slog.DiscardHandler))
	listen := func(name string) (net.Listener, string) {
		path := shortTempDir(t) + "/" + name
		ln, err := net.Listen("unix", path)
		require.NoError(t, err)
		limited := b.listener(ln)
		t.Cleanup(func() { _ = limited.Close() })
		return limited, path
	}
	hook, hookPath := listen("hook.sock")
	plugin, pluginPath := listen("plugin.sock")
	accept := func(ln net.Listener) <-chan net.Conn {
		ch := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				ch <- c
			}
		}()
		return ch
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", hookPath)
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		held = append(held, <-accept(hook))
	}
	c, err := net.Dial("unix", pluginPath) // waits in the plugin socket's backlog
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	third := accept(plugin)
	select {
	case <-third:
		t.Fatal("the plugin socket accepted a third connection while the hook socket held both slots")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, held[0].Close())
	select {
	case conn := <-third:
		_ = conn.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin socket's connection was not accepted once a hook connection closed")
	}
	_ = held[1].Close()
}
