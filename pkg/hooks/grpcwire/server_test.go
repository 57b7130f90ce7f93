package grpcwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rawCodec lets grpc-go's client send and receive message bytes as they are: the tests drive this
// server with the client KubeVirt's virt-launcher uses (google.golang.org/grpc), nothing of ours.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// serve starts a Server with h on a unix socket in a test directory and returns it with a grpc-go
// client connection to it.
func serve(t *testing.T, cfg Config) (*Server, *grpc.ClientConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	srv := NewServer(cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	cc, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cc.Close()
		srv.Stop()
		assert.NoError(t, <-served)
	})
	return srv, cc, path
}

func invoke(ctx context.Context, cc *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	var resp []byte
	err := cc.Invoke(ctx, method, &req, &resp)
	return resp, err
}

func echo(_ context.Context, method string, req []byte) ([]byte, error) {
	return append([]byte(method+":"), req...), nil
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>13)
	}
	return b
}

func TestServer_RoundTripsMessagesOfEverySize(t *testing.T) {
	_, cc, _ := serve(t, Config{Handler: echo, MaxRecvMsgSize: 32 << 20})
	for _, n := range []int{0, 1, 4, 5, 16379, 16384, 65535, 65536, 1 << 20, 9<<20 + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			req := pattern(n)
			resp, err := invoke(context.Background(), cc, "/pkg.Svc/Echo", req)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(append([]byte("/pkg.Svc/Echo:"), req...), resp), "response of %d bytes differs", len(resp))
		})
	}
}

func TestServer_StatusReachesTheClient(t *testing.T) {
	msg := "missing: net1 (annotation k8s.v1.cni.cncf.io/network-status) 100% \u00e9\n\tend"
	_, cc, _ := serve(t, Config{Handler: func(context.Context, string, []byte) ([]byte, error) {
		return nil, fmt.Errorf("wrapped: %w", Error(FailedPrecondition, msg))
	}})
	_, err := invoke(context.Background(), cc, "/pkg.Svc/M", []byte("x"))
	st, ok := status.FromError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, codes.FailedPrecondition, st.Code())
	assert.Equal(t, msg, st.Message())
}

func TestServer_ErrorsMapToCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{errors.New("plain"), codes.Unknown},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{fmt.Errorf("wait: %w", context.Canceled), codes.Canceled},
		{Error(InvalidArgument, "bad"), codes.InvalidArgument},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			_, cc, _ := serve(t, Config{Handler: func(context.Context, string, []byte) ([]byte, error) { return nil, tc.err }})
			_, err := invoke(context.Background(), cc, "/pkg.Svc/M", nil)
			assert.Equal(t, tc.want, status.Code(err), "%v", err)
		})
	}
}

func TestServer_PanicIsInternal(t *testing.T) {
	_, cc, _ := serve(t, Config{Handler: func(context.Context, string, []byte) ([]byte, error) { panic("boom") }})
	_, err := invoke(context.Background(), cc, "/pkg.Svc/M", nil)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "boom")
	// The connection still serves.
	_, err = invoke(context.Background(), cc, "/pkg.Svc/M", nil)
	assert.Equal(t, codes.Internal, status.Code(err))
}

func TestServer_RefusesTooLargeBeforeTheHandler(t *testing.T) {
	var (
		mu      sync.Mutex
		refused []string
		called  bool
	)
	_, cc, _ := serve(t, Config{
		MaxRecvMsgSize: 1000,
		Handler: func(context.Context, string, []byte) ([]byte, error) {
			mu.Lock()
			called = true
			mu.Unlock()
			return []byte("ok"), nil
		},
		OnRefused: func(method string, st *Status) {
			mu.Lock()
			refused = append(refused, method+" "+st.Code.String())
			mu.Unlock()
		},
	})
	_, err := invoke(context.Background(), cc, "/pkg.Svc/Big", pattern(5<<20))
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "(5242880 vs. 1000)")
	// The next call on the same connection works: the refused upload did not break the connection.
	resp, err := invoke(context.Background(), cc, "/pkg.Svc/Small", pattern(1000))
	require.NoError(t, err)
	assert.Equal(t, "ok", string(resp))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"/pkg.Svc/Big ResourceExhausted"}, refused)
	assert.True(t, called)
}

// blockingHandler reports each call's context as it starts and blocks until its context ends, then
// reports why it ended.
type blockingHandler struct {
	started chan struct{}
	ended   chan error
}

func newBlocking() *blockingHandler {
	return &blockingHandler{started: make(chan struct{}, 64), ended: make(chan error, 64)}
}

func (b *blockingHandler) handle(ctx context.Context, _ string, _ []byte) ([]byte, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- ctx.Err()
	return nil, ctx.Err()
}

func TestServer_DeadlineReachesTheHandler(t *testing.T) {
	b := newBlocking()
	_, cc, _ := serve(t, Config{Handler: b.handle})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := invoke(ctx, cc, "/pkg.Svc/M", nil)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	// The server's own context ended, from grpc-timeout or from the client's RST_STREAM.
	assert.Error(t, <-b.ended)
}

func TestServer_ClientCancelEndsTheHandler(t *testing.T) {
	b := newBlocking()
	_, cc, _ := serve(t, Config{Handler: b.handle})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := invoke(ctx, cc, "/pkg.Svc/M", nil)
		done <- err
	}()
	<-b.started
	cancel()
	assert.Equal(t, codes.Canceled, status.Code(<-done))
	assert.ErrorIs(t, <-b.ended, context.Canceled)
}

func TestServer_ManyConcurrentCallsOnOneConnection(t *testing.T) {
	release := make(chan struct{})
	var (
		mu        sync.Mutex
		now, most int
	)
	_, cc, _ := serve(t, Config{MaxConcurrentStreams: 4, Handler: func(_ context.Context, m string, req []byte) ([]byte, error) {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		<-release
		mu.Lock()
		now--
		mu.Unlock()
		return echo(context.Background(), m, req)
	}})
	const calls = 40
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			req := pattern(100 + i*3000)
			resp, err := invoke(context.Background(), cc, "/pkg.Svc/M", req)
			if err == nil && !bytes.Equal(resp, append([]byte("/pkg.Svc/M:"), req...)) {
				err = fmt.Errorf("call %d: response differs", i)
			}
			errs <- err
		}()
	}
	close(release)
	for range calls {
		assert.NoError(t, <-errs)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, most, 4, "more calls ran at once than SETTINGS_MAX_CONCURRENT_STREAMS allows")
}

func TestServer_GracefulStopWaitsForCallsInFlight(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	srv, cc, path := serve(t, Config{Handler: func(ctx context.Context, m string, req []byte) ([]byte, error) {
		close(started)
		<-release
		return []byte("done"), nil
	}})
	call := make(chan error, 1)
	go func() {
		resp, err := invoke(context.Background(), cc, "/pkg.Svc/M", nil)
		if err == nil && string(resp) != "done" {
			err = fmt.Errorf("response %q", resp)
		}
		call <- err
	}()
	<-started
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	// A new connection is refused once the listener is closed.
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	}, 5*time.Second, time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}
	close(release)
	assert.NoError(t, <-call)
	<-stopped
}

func TestServer_StopEndsCallsInFlight(t *testing.T) {
	b := newBlocking()
	srv, cc, _ := serve(t, Config{Handler: b.handle})
	call := make(chan error, 1)
	go func() {
		_, err := invoke(context.Background(), cc, "/pkg.Svc/M", nil)
		call <- err
	}()
	<-b.started
	srv.Stop()
	assert.ErrorIs(t, <-b.ended, context.Canceled)
	assert.Equal(t, codes.Unavailable, status.Code(<-call))
}

func TestServer_ServeAfterStop(t *testing.T) {
	srv := NewServer(Config{Handler: echo})
	srv.Stop()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	require.NoError(t, err)
	assert.ErrorIs(t, srv.Serve(ln), ErrServerStopped)
}

// rawConn dials the server and returns the connection with the server's first frames read.
func rawConn(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readFrames reads frames until the connection ends and returns their types.
func readFrames(t *testing.T, c net.Conn) []frameType {
	t.Helper()
	var types []frameType
	buf := make([]byte, 1<<16)
	for {
		h, err := readFrameHeader(c, buf)
		if err != nil {
			assert.ErrorIs(t, err, io.EOF)
			return types
		}
		types = append(types, h.Type)
		_, err = io.ReadFull(c, buf[:h.Length])
		require.NoError(t, err)
	}
}

func TestServer_SilentClientIsDroppedAfterTheHandshakeTimeout(t *testing.T) {
	_, _, path := serve(t, Config{Handler: echo, HandshakeTimeout: 50 * time.Millisecond})
	c := rawConn(t, path)
	// The server speaks first (SETTINGS, WINDOW_UPDATE), then closes: no preface came.
	assert.Equal(t, []frameType{frameSettings, frameWindowUpdate}, readFrames(t, c))
}

func TestServer_ProtocolErrorsEndTheConnectionWithGoAway(t *testing.T) {
	settings := appendFrameHeader(nil, frameHeader{Type: frameSettings})
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"wrong preface", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"first frame not SETTINGS", append([]byte(clientPreface), appendFrameHeader(nil, frameHeader{Type: framePing, Length: 8})...)},
		{"frame over the max size", append(append([]byte(clientPreface), settings...), appendFrameHeader(nil, frameHeader{Type: frameData, Length: 1 << 20, StreamID: 1})...)},
		{"DATA on an idle stream", append(append(append([]byte(clientPreface), settings...), appendFrameHeader(nil, frameHeader{Type: frameData, Length: 1, StreamID: 1})...), 0)},
		{"HEADERS on stream 0", append(append(append([]byte(clientPreface), settings...), appendFrameHeader(nil, frameHeader{Type: frameHeaders, Length: 1, Flags: flagEndHeaders})...), 0x82)},
		{"bad HPACK", append(append(append([]byte(clientPreface), settings...), appendFrameHeader(nil, frameHeader{Type: frameHeaders, Length: 1, Flags: flagEndHeaders, StreamID: 1})...), 0xff)},
		{"CONTINUATION without HEADERS", append(append(append([]byte(clientPreface), settings...), appendFrameHeader(nil, frameHeader{Type: frameContinuation, Length: 1, StreamID: 1})...), 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, path := serve(t, Config{Handler: echo})
			c := rawConn(t, path)
			_, err := c.Write(tc.send)
			require.NoError(t, err)
			types := readFrames(t, c)
			assert.Contains(t, types, frameGoAway, "frames %v", types)
		})
	}
}

func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1S", time.Second, true},
		{"250m", 250 * time.Millisecond, true},
		{"99999999H", time.Duration(1<<63 - 1), true},
		{"0n", 0, true},
		{"7u", 7 * time.Microsecond, true},
		{"2M", 2 * time.Minute, true},
		{"S", 0, false},
		{"123456789S", 0, false},
		{"1x", 0, false},
		{"-1S", 0, false},
		{"1 S", 0, false},
	} {
		got, err := parseTimeout(tc.in)
		if !tc.ok {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestEncodeMessage(t *testing.T) {
	assert.Equal(t, "plain text", encodeMessage("plain text"))
	assert.Equal(t, "100%25 %C3%A9%0A", encodeMessage("100% \u00e9\n"))
}
