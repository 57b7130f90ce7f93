package grpcwire

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rawFrame is one frame the server sent.
type rawFrame struct {
	h       frameHeader
	payload []byte
}

func (f rawFrame) String() string {
	return fmt.Sprintf("%s flags=%#x stream=%d len=%d", f.h.Type, f.h.Flags, f.h.StreamID, f.h.Length)
}

// rawClient is a hand-driven HTTP/2 client: it writes frames as given and reads the server's.
type rawClient struct {
	t      *testing.T
	c      net.Conn
	frames []rawFrame // every frame read so far
}

func newRawClient(t *testing.T, path string) *rawClient {
	t.Helper()
	rc := &rawClient{t: t, c: rawConn(t, path)}
	rc.write(append([]byte(clientPreface), clientFrame(frameSettings, 0, 0, nil)...))
	return rc
}

func (rc *rawClient) write(b ...[]byte) {
	rc.t.Helper()
	for _, p := range b {
		_, err := rc.c.Write(p)
		require.NoError(rc.t, err)
	}
}

// sync sends a PING and reads frames until its ACK: every frame written before it has been handled by
// the server's reader (which handles frames in order). It returns the frames read meanwhile and
// whether the connection ended first.
func (rc *rawClient) sync(tag byte) (got []rawFrame, ended bool) {
	rc.t.Helper()
	data := []byte{tag, 's', 'y', 'n', 'c', 'p', 'n', 'g'}
	rc.write(clientFrame(framePing, 0, 0, data))
	require.NoError(rc.t, rc.c.SetReadDeadline(time.Now().Add(20*time.Second)))
	buf := make([]byte, 1<<16)
	for {
		h, err := readFrameHeader(rc.c, buf)
		if err != nil {
			return got, true
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(rc.c, p); err != nil {
			return got, true
		}
		f := rawFrame{h, p}
		rc.frames = append(rc.frames, f)
		if h.Type == framePing && h.has(flagAck) && string(p) == string(data) {
			return got, false
		}
		got = append(got, f)
	}
}

func rstCode(f rawFrame) errCode { return errCode(binary.BigEndian.Uint32(f.payload)) }

// A second HEADERS frame with END_STREAM on a stream whose request already ended (half-closed remote)
// is a stream error STREAM_CLOSED (RFC 9113 section 5.1): it must not start the handler again, which
// would let a client run as many handlers as it sends frames, past MaxConcurrentStreams.
func TestConn_HeadersAfterEndStream_StreamClosedNotASecondHandler(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 64)
	_, _, path := serve(t, Config{MaxConcurrentStreams: 1, Handler: func(ctx context.Context, _ string, req []byte) ([]byte, error) {
		calls.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return req, nil
	}})
	defer close(release)
	rc := newRawClient(t, path)
	rc.write(clientFrame(frameHeaders, flagEndHeaders, 1, requestHeaders("/pkg.Svc/M")),
		clientFrame(frameData, flagEndStream, 1, grpcMessage([]byte("x"))))
	<-started
	const dups = 3
	for range dups {
		// An empty header block is a valid (trailers) block.
		rc.write(clientFrame(frameHeaders, flagEndHeaders|flagEndStream, 1, nil))
	}
	got, ended := rc.sync(1)
	closed := ended
	for _, f := range got {
		if (f.h.Type == frameRSTStream && f.h.StreamID == 1) || f.h.Type == frameGoAway {
			closed = true
		}
	}
	if closed {
		return
	}
	// Positive evidence: the handler runs again, once for each frame.
	deadline := time.After(10 * time.Second)
	for calls.Load() < 1+dups {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("no RST_STREAM or GOAWAY for HEADERS on a half-closed stream; frames %v", got)
		}
	}
	t.Errorf("HEADERS after END_STREAM on stream 1 answered with neither RST_STREAM nor GOAWAY: the handler ran %d times for one stream", calls.Load())
}

// A client that opens a complete call and resets it at once (the "rapid reset" pattern) must not free
// its MaxConcurrentStreams slot while the handler still runs, or handlers that do not return on
// ctx.Done (CPU-bound ones, like the hook's XML work) pile up without bound: a call holds its slot
// until its handler returns.
func TestConn_ResetStreams_KeepTheirSlotUntilTheHandlerReturns(t *testing.T) {
	const limit, calls = 2, 12
	var running, peak atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, calls)
	_, _, path := serve(t, Config{MaxConcurrentStreams: limit, Handler: func(context.Context, string, []byte) ([]byte, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		started <- struct{}{}
		<-release // busy: ignores ctx
		running.Add(-1)
		return nil, nil
	}})
	defer close(release)
	rc := newRawClient(t, path)
	for i := range calls {
		id := uint32(2*i + 1)
		rc.write(clientFrame(frameHeaders, flagEndHeaders, id, requestHeaders("/pkg.Svc/M")),
			clientFrame(frameData, flagEndStream, id, grpcMessage([]byte("x"))),
			clientFrame(frameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, uint32(errCancel))))
	}
	got, _ := rc.sync(2)
	refused := 0
	for _, f := range got {
		if f.h.Type == frameRSTStream && rstCode(f) == errRefusedStream {
			refused++
		}
	}
	if refused >= calls-limit {
		return
	}
	deadline := time.After(10 * time.Second)
	for i := 0; i < calls-refused; i++ {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("%d of %d calls started, %d refused", i, calls, refused)
		}
	}
	t.Errorf("MaxConcurrentStreams %d, but %d handlers ran at once (%d streams refused): reset streams free their slot while their handler runs",
		limit, peak.Load(), refused)
}

// grpc-go's client gives a stream's MaxConcurrentStreams slot back when it reads the END_STREAM
// trailers, and sends a queued call's HEADERS at once: the server must have given the slot back before
// it sent them, or it refuses that call (REFUSED_STREAM), and a request over grpc-go's retry buffer
// (256 KiB) fails with Unavailable although the client never exceeded the limit. A timing race, so the
// test makes 600 calls through one slot.
func TestConn_SlotIsFreeBeforeTheClientSeesTheTrailers(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	_, cc, _ := serve(t, Config{MaxConcurrentStreams: 1, MaxRecvMsgSize: 1 << 20, Handler: func(context.Context, string, []byte) ([]byte, error) {
		return []byte("ok"), nil
	}})
	req := pattern(300 << 10)
	// One call first: the client has applied the server's SETTINGS (MAX_CONCURRENT_STREAMS 1) by then.
	_, err := invoke(context.Background(), cc, "/pkg.Svc/M", nil)
	require.NoError(t, err)
	const workers, each = 4, 150
	var (
		wg     sync.WaitGroup
		failed atomic.Int32
		first  atomic.Value
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := invoke(context.Background(), cc, "/pkg.Svc/M", req); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
					assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d sequential-slot calls failed: %v", n, workers*each, first.Load())
	}
}

// A 5-byte length prefix must not make the reader allocate the whole announced message before it
// arrives (MaxConcurrentStreams x MaxRecvMsgSize for a few hundred bytes from the client): the buffer
// grows with what arrives.
func TestConn_AnnouncedMessage_NotAllocatedBeforeItArrives(t *testing.T) {
	const streams, size = 4, 8 << 20
	_, _, path := serve(t, Config{MaxConcurrentStreams: streams, MaxRecvMsgSize: size, Handler: echo})
	rc := newRawClient(t, path)
	rc.sync(0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range streams {
		id := uint32(2*i + 1)
		rc.write(clientFrame(frameHeaders, flagEndHeaders, id, requestHeaders("/pkg.Svc/M")),
			clientFrame(frameData, 0, id, binary.BigEndian.AppendUint32([]byte{0}, size)))
	}
	rc.sync(3)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grown, int64(size), "the server holds %d MiB for %d bytes of DATA", grown>>20, streams*5)
}

// A connection accepted just before GracefulStop must not get GOAWAY before the server's SETTINGS (the
// server preface is SETTINGS, RFC 9113 section 3.4; grpc-go's client fails with "initial http2 frame
// from server is not a settings frame"): it is closed without a frame instead. The scheduling is forced
// here by starting serve after GracefulStop.
func TestConn_GracefulStopBeforeThePreface_NoGoAwayFirst(t *testing.T) {
	srv := NewServer(Config{Handler: echo})
	c, client := pipeConn(srv)
	defer client.Close()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	buf := make([]byte, 1<<16)
	h, err := readFrameHeader(client, buf)
	go c.serve() // Serve's "go c.serve()", scheduled late
	_, _ = io.Copy(io.Discard, client)
	<-stopped
	if err == nil {
		assert.Equal(t, frameSettings, h.Type, "the server's first frame")
	} else {
		assert.ErrorIs(t, err, io.EOF, "closed without a frame")
	}
}

// Flow control under normal use, concurrently: requests up to the sidecar's 27 MiB and 4 MiB answers
// on one grpc-go connection (BDP estimation grows its windows meanwhile).
func TestConn_ConcurrentLargeCallsOnOneConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	_, cc, _ := serve(t, Config{MaxRecvMsgSize: 28 << 20, Handler: func(_ context.Context, _ string, req []byte) ([]byte, error) {
		return req[:min(len(req), 4<<20)], nil
	}})
	sizes := []int{27 << 20, 4 << 20, 5<<20 + 7, 300 << 10}
	errs := make(chan error, len(sizes))
	for _, n := range sizes {
		go func() {
			req := pattern(n)
			resp, err := invoke(context.Background(), cc, "/pkg.Svc/M", req)
			if err == nil && string(resp) != string(req[:min(n, 4<<20)]) {
				err = fmt.Errorf("%d: response differs", n)
			}
			errs <- err
		}()
	}
	for range sizes {
		assert.NoError(t, <-errs)
	}
}

// The client stops reading a large answer (its stream window runs out) and cancels: its RST_STREAM must
// wake the writer waiting for window, so the stream ends and GracefulStop returns.
func TestConn_CancelWhileTheAnswerWaitsForWindow_EndsTheWriter(t *testing.T) {
	answered := make(chan struct{})
	srv, cc, _ := serve(t, Config{Handler: func(context.Context, string, []byte) ([]byte, error) {
		close(answered)
		return pattern(4 << 20), nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cs, err := cc.NewStream(ctx, &grpcStreamDesc, "/pkg.Svc/M")
	require.NoError(t, err)
	req := []byte("x")
	require.NoError(t, cs.SendMsg(&req))
	require.NoError(t, cs.CloseSend())
	_, err = cs.Header() // the answer's HEADERS came: the handler returned, the writer is sending
	require.NoError(t, err)
	<-answered
	cancel()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("GracefulStop still waits: the writer of the reset stream did not end")
	}
}

// SETTINGS_INITIAL_WINDOW_SIZE 0 holds the answer's DATA; a stream WINDOW_UPDATE lets some through, and
// a SETTINGS raising the initial window lets the rest through (RFC 9113 section 6.9.2).
func TestConn_InitialWindowChangesApplyToOpenStreams(t *testing.T) {
	const n = 1000
	_, _, path := serve(t, Config{Handler: func(context.Context, string, []byte) ([]byte, error) { return pattern(n), nil }})
	rc := &rawClient{t: t, c: rawConn(t, path)}
	rc.write(append([]byte(clientPreface), clientFrame(frameSettings, 0, 0, []byte{0, 4, 0, 0, 0, 0})...))
	rc.write(clientFrame(frameHeaders, flagEndHeaders, 1, requestHeaders("/pkg.Svc/M")),
		clientFrame(frameData, flagEndStream, 1, grpcMessage([]byte("x"))))
	// Read until the answer's HEADERS: no DATA may come with a zero window.
	data := 0
	readUntil := func(stop func(rawFrame) bool) {
		require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(20*time.Second)))
		buf := make([]byte, 1<<16)
		for {
			h, err := readFrameHeader(rc.c, buf)
			require.NoError(t, err)
			p := make([]byte, h.Length)
			_, err = io.ReadFull(rc.c, p)
			require.NoError(t, err)
			if h.Type == frameData && h.StreamID == 1 {
				data += len(p)
			}
			if stop(rawFrame{h, p}) {
				return
			}
		}
	}
	readUntil(func(f rawFrame) bool { return f.h.Type == frameHeaders && f.h.StreamID == 1 })
	rc.write(clientFrame(frameWindowUpdate, 0, 1, binary.BigEndian.AppendUint32(nil, 10)))
	readUntil(func(f rawFrame) bool { return f.h.Type == frameData })
	assert.Equal(t, 10, data)
	rc.write(clientFrame(frameSettings, 0, 0, []byte{0, 4, 0, 0, 0xff, 0xff}))
	readUntil(func(f rawFrame) bool { return f.h.Type == frameHeaders && f.h.has(flagEndStream) })
	assert.Equal(t, n+5, data)
}

var grpcStreamDesc = grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
