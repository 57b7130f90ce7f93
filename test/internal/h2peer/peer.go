package h2peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FrameMax is HTTP/2's default SETTINGS_MAX_FRAME_SIZE, which grpc-go's server keeps.
const FrameMax = 16 << 10

// Peer is one HTTP/2 connection that writes whatever an attack says, legal or not: golang.org/x/net's framer
// with AllowIllegalWrites, and an HPACK encoder for well-formed header blocks. A goroutine reads and discards
// the server's frames (answering its PINGs and SETTINGS only where the attack wants a live peer), recording
// the last GOAWAY, so that the server's writes never block on us unless an attack means them to.
type Peer struct {
	conn net.Conn
	fr   *http2.Framer

	mu   sync.Mutex // writes and the encoder
	hbuf bytes.Buffer
	henc *hpack.Encoder

	readDone chan struct{}
	rmu      sync.Mutex
	goAway   *http2.GoAwayFrame
	readErr  error
	frames   int

	// The server's flow-control windows for what we send (SendInWindow): the connection's, and each
	// stream's (absent: the initial window, which the server's SETTINGS set).
	wmu         sync.Mutex
	windowMoved *sync.Cond
	connWindow  int64
	initWindow  int64
	windows     map[uint32]int64
	ended       map[uint32]bool // streams the server reset or ended
}

// Options say how the peer starts.
type Options struct {
	// NoPreface: connect and write nothing (a silent connection).
	NoPreface bool
	// Settings are sent in the first SETTINGS frame.
	Settings []http2.Setting
	// NoRead: never read what the server writes (a peer that stops reading).
	NoRead bool
}

// Dial connects to the unix socket at path, within ctx.
func Dial(ctx context.Context, path string, o Options) (*Peer, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	p := &Peer{conn: conn, fr: http2.NewFramer(conn, conn), readDone: make(chan struct{}),
		connWindow: 65535, initWindow: 65535, windows: map[uint32]int64{}, ended: map[uint32]bool{}}
	p.windowMoved = sync.NewCond(&p.wmu)
	p.fr.AllowIllegalWrites = true
	p.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	p.fr.MaxHeaderListSize = 1 << 20
	p.henc = hpack.NewEncoder(&p.hbuf)
	if !o.NoPreface {
		if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("write preface: %w", err)
		}
		if err := p.fr.WriteSettings(o.Settings...); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("write SETTINGS: %w", err)
		}
	}
	if o.NoRead {
		close(p.readDone)
	} else {
		go p.read()
	}
	return p, nil
}

func (p *Peer) read() {
	defer close(p.readDone)
	defer func() { // wake SendInWindow: nothing more will come
		p.wmu.Lock()
		p.windowMoved.Broadcast()
		p.wmu.Unlock()
	}()
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			p.rmu.Lock()
			p.readErr = err
			p.rmu.Unlock()
			return
		}
		p.track(f)
		p.rmu.Lock()
		p.frames++
		if g, ok := f.(*http2.GoAwayFrame); ok {
			p.goAway = &http2.GoAwayFrame{FrameHeader: g.FrameHeader, LastStreamID: g.LastStreamID, ErrCode: g.ErrCode}
		}
		p.rmu.Unlock()
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			p.mu.Lock()
			_ = p.fr.WriteSettingsAck()
			p.mu.Unlock()
		}
	}
}

// track follows the server's windows: WINDOW_UPDATE frames and SETTINGS_INITIAL_WINDOW_SIZE.
func (p *Peer) track(f http2.Frame) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	switch f := f.(type) {
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			p.connWindow += int64(f.Increment)
		} else {
			p.windows[f.StreamID] = p.window(f.StreamID) + int64(f.Increment)
		}
	case *http2.RSTStreamFrame:
		p.ended[f.StreamID] = true
	case *http2.MetaHeadersFrame:
		if f.StreamEnded() {
			p.ended[f.StreamID] = true
		}
	case *http2.SettingsFrame:
		if v, ok := f.Value(http2.SettingInitialWindowSize); ok && !f.IsAck() {
			delta := int64(v) - p.initWindow
			p.initWindow = int64(v)
			for id := range p.windows {
				p.windows[id] += delta
			}
		}
	default:
		return
	}
	p.windowMoved.Broadcast()
}

// window is stream id's send window; wmu is held.
func (p *Peer) window(id uint32) int64 {
	if w, ok := p.windows[id]; ok {
		return w
	}
	return p.initWindow
}

// ErrStreamEnded is SendInWindow's answer when the server ended the stream before all of b was sent (it
// refused the call).
var ErrStreamEnded = errors.New("the server ended the stream")

// SendInWindow writes b on stream id as a well-behaved client does: never past the server's windows,
// waiting for its WINDOW_UPDATE frames (until the stream or the connection ends, or ctx does).
func (p *Peer) SendInWindow(ctx context.Context, id uint32, b []byte, end bool) error {
	stop := context.AfterFunc(ctx, func() {
		p.wmu.Lock()
		p.windowMoved.Broadcast()
		p.wmu.Unlock()
	})
	defer stop()
	for len(b) > 0 || end {
		p.wmu.Lock()
		for p.connWindow <= 0 || p.window(id) <= 0 {
			if ctx.Err() != nil {
				p.wmu.Unlock()
				return ctx.Err()
			}
			if closed, _ := p.Closed(); closed {
				p.wmu.Unlock()
				return net.ErrClosed
			}
			if p.ended[id] {
				p.wmu.Unlock()
				return ErrStreamEnded
			}
			p.windowMoved.Wait()
		}
		n := int(min(int64(len(b)), int64(FrameMax), p.connWindow, p.window(id)))
		p.connWindow -= int64(n)
		p.windows[id] = p.window(id) - int64(n)
		p.wmu.Unlock()
		last := end && n == len(b)
		if err := p.Frame(func(fr *http2.Framer) error { return fr.WriteData(id, last, b[:n]) }); err != nil {
			return err
		}
		b = b[n:]
		if last || (len(b) == 0 && !end) {
			return nil
		}
	}
	return nil
}

// Hangup closes the connection without waiting for the reader.
func (p *Peer) Hangup() { _ = p.conn.Close() }

// Close closes the connection and waits for the reader.
func (p *Peer) Close() {
	_ = p.conn.Close()
	<-p.readDone
}

// Closed reports whether the server ended the connection (the reader saw EOF or a reset), and how.
func (p *Peer) Closed() (bool, string) {
	select {
	case <-p.readDone:
	default:
		return false, ""
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	how := fmt.Sprint(p.readErr)
	if p.goAway != nil {
		how = "GOAWAY " + p.goAway.ErrCode.String()
	}
	return true, how
}

// WaitClosed waits up to timeout for the server to end the connection.
func (p *Peer) WaitClosed(timeout time.Duration) (string, error) {
	select {
	case <-p.readDone:
		_, how := p.Closed()
		return how, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("the server kept the connection for %s", timeout)
	}
}

// GoAway is the last GOAWAY the server sent, if any.
func (p *Peer) GoAway() *http2.GoAwayFrame {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return p.goAway
}

// HeaderBlock encodes a gRPC call's request headers for method, plus extra fields.
func (p *Peer) HeaderBlock(method string, extra ...hpack.HeaderField) []byte {
	p.hbuf.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
		_ = p.henc.WriteField(f)
	}
	for _, f := range extra {
		_ = p.henc.WriteField(f)
	}
	return append([]byte(nil), p.hbuf.Bytes()...)
}

// Call opens stream id for method (HEADERS with END_HEADERS).
func (p *Peer) Call(id uint32, method string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.HeaderBlock(method), EndHeaders: true})
}

// Data writes b on stream id, in frames of at most frame bytes.
func (p *Peer) Data(id uint32, b []byte, end bool, frame int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(b) > frame {
		if err := p.fr.WriteData(id, false, b[:frame]); err != nil {
			return err
		}
		b = b[frame:]
	}
	return p.fr.WriteData(id, end, b)
}

// Frame runs write with the framer under the write lock (for the frames Call and Data do not cover).
func (p *Peer) Frame(write func(fr *http2.Framer) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return write(p.fr)
}

// WriteRaw writes b on the connection as it is, under the write lock: bytes no framer writes (part of the
// preface, say).
func (p *Peer) WriteRaw(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.conn.Write(b)
	return err
}

// Prefix is gRPC's message header: not compressed, length n.
func Prefix(n uint32) []byte {
	b := make([]byte, 5)
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

// IsClosedErr says whether err is the connection being gone (the server closed it, or we did).
func IsClosedErr(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) ||
		errors.As(err, &opErr)
}
