package hooks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawPeer is an HTTP/2 client that sends what a test says, frame by frame, where grpc-go's client would
// only send whole, well-formed calls: a request cut short, headers and nothing else, PINGs.
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	fr   *http2.Framer

	mu   sync.Mutex // the framer's writes, the encoder
	hbuf bytes.Buffer
	henc *hpack.Encoder
}

// dialRaw connects to the socket at path and sends the client preface and an empty SETTINGS frame.
func dialRaw(t *testing.T, path string) *rawPeer {
	t.Helper()
	conn, err := net.Dial("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	p := &rawPeer{t: t, conn: conn, fr: http2.NewFramer(conn, conn)}
	p.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	p.henc = hpack.NewEncoder(&p.hbuf)
	_, err = conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	require.NoError(t, p.fr.WriteSettings())
	return p
}

// call opens stream id for a gRPC method, as grpc-go's client does.
func (p *rawPeer) call(id uint32, method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		require.NoError(p.t, p.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	require.NoError(p.t, p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.hbuf.Bytes(), EndHeaders: true}))
}

// send writes b on stream id in DATA frames of at most 16 KiB (the default SETTINGS_MAX_FRAME_SIZE).
func (p *rawPeer) send(id uint32, b []byte, end bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(b) > 16<<10 {
		require.NoError(p.t, p.fr.WriteData(id, false, b[:16<<10]))
		b = b[16<<10:]
	}
	require.NoError(p.t, p.fr.WriteData(id, end, b))
}

func (p *rawPeer) reset(id uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NoError(p.t, p.fr.WriteRSTStream(id, http2.ErrCodeCancel))
}

func (p *rawPeer) ping(n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var data [8]byte
	binary.BigEndian.PutUint64(data[:], n)
	require.NoError(p.t, p.fr.WritePing(false, data))
}

// prefix is gRPC's message header: not compressed, length n.
func prefix(n uint32) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

// errClosed is what until returns when the server closed the connection first.
var errClosed = errors.New("connection closed by the server")

// until reads frames until stop returns true for one, the server closes the connection (errClosed), or
// timeout passes. The server's SETTINGS and PINGs are answered as a client would.
func (p *rawPeer) until(timeout time.Duration, stop func(http2.Frame) bool) error {
	require.NoError(p.t, p.conn.SetReadDeadline(time.Now().Add(timeout)))
	defer func() { _ = p.conn.SetReadDeadline(time.Time{}) }()
	for {
		f, err := p.fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errClosed
		}
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				p.mu.Lock()
				err = p.fr.WriteSettingsAck()
				p.mu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				p.mu.Lock()
				err = p.fr.WritePing(true, f.Data)
				p.mu.Unlock()
			}
		}
		if err != nil {
			return err
		}
		if stop(f) {
			return nil
		}
	}
}

// streamEnd is a stop function of until: the server ended stream id (RST_STREAM, or trailers), recording
// the RST code or the grpc-status.
func streamEnd(id uint32, rst *http2.ErrCode, grpcStatus *string) func(http2.Frame) bool {
	return func(f http2.Frame) bool {
		if f.Header().StreamID != id {
			return false
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if rst != nil {
				*rst = f.ErrCode
			}
			return true
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				return false
			}
			if grpcStatus != nil {
				*grpcStatus = f.PseudoValue("status") + " " + headerValue(f, "grpc-status") + " " + headerValue(f, "grpc-message")
			}
			return true
		}
		return false
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.Fields {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}
