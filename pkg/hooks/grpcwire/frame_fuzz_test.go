package grpcwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/net/http2/hpack"
)

// clientFrame is one frame as a client would write it.
func clientFrame(t frameType, flags uint8, id uint32, payload []byte) []byte {
	return append(appendFrameHeader(nil, frameHeader{Length: uint32(len(payload)), Type: t, Flags: flags, StreamID: id}), payload...)
}

// requestHeaders is the HPACK block of a unary call to path, as grpc-go's client sends one.
func requestHeaders(path string, extra ...hpack.HeaderField) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
		{Name: ":authority", Value: "localhost"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		_ = enc.WriteField(f)
	}
	return b.Bytes()
}

// grpcMessage is msg with its 5-byte gRPC prefix.
func grpcMessage(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

// fuzzSeeds are frame sequences that follow the client preface and SETTINGS: a whole call, and the
// shapes the protocol allows around it.
func fuzzSeeds() [][]byte {
	call := func(id uint32) []byte {
		return append(clientFrame(frameHeaders, flagEndHeaders, id, requestHeaders("/pkg.Svc/M", hpack.HeaderField{Name: "grpc-timeout", Value: "1S"})),
			clientFrame(frameData, flagEndStream, id, grpcMessage([]byte("hello")))...)
	}
	block := requestHeaders("/pkg.Svc/M")
	padded := append([]byte{3}, grpcMessage([]byte("x"))...)
	padded = append(padded, 0, 0, 0)
	return [][]byte{
		call(1),
		append(call(1), call(3)...),
		// HEADERS split across CONTINUATION, a padded DATA frame, the message split across frames.
		append(append(append(clientFrame(frameHeaders, 0, 1, block[:4]), clientFrame(frameContinuation, flagEndHeaders, 1, block[4:])...),
			clientFrame(frameData, flagPadded, 1, padded)...), clientFrame(frameData, flagEndStream, 1, nil)...),
		append(clientFrame(frameHeaders, flagEndHeaders, 1, block), clientFrame(frameData, 0, 1, grpcMessage(nil)[:3])...),
		append(clientFrame(frameHeaders, flagEndHeaders, 1, block), clientFrame(frameRSTStream, 0, 1, []byte{0, 0, 0, 8})...),
		append(clientFrame(framePing, 0, 0, make([]byte, 8)), clientFrame(frameWindowUpdate, 0, 0, []byte{0, 1, 0, 0})...),
		clientFrame(frameSettings, 0, 0, []byte{0, 4, 0, 0, 0, 1, 0, 5, 0, 0, 0x40, 0}),
		clientFrame(frameGoAway, 0, 0, make([]byte, 8)),
		// A message announced larger than the limit, then more of it.
		append(append(clientFrame(frameHeaders, flagEndHeaders, 1, block), clientFrame(frameData, 0, 1, []byte{0, 0, 1, 0, 0})...),
			clientFrame(frameData, flagEndStream, 1, make([]byte, 100))...),
	}
}

// pipeConn registers a connection over net.Pipe with srv, as Serve does for an accepted one, without
// starting it; the caller runs c.serve and talks through the client end.
func pipeConn(srv *Server) (c *conn, client net.Conn) {
	server, client := net.Pipe()
	c = newConn(srv, server)
	srv.mu.Lock()
	srv.conns[c] = struct{}{}
	srv.connsWG.Add(1)
	srv.mu.Unlock()
	return c, client
}

// The reader never panics and always ends, whatever frames follow a valid handshake; the handler runs
// only for requests that arrived whole.
func FuzzConnFrames(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	handshake := append([]byte(clientPreface), clientFrame(frameSettings, 0, 0, nil)...)
	f.Fuzz(func(t *testing.T, in []byte) {
		srv := NewServer(Config{MaxRecvMsgSize: 1 << 12, HandshakeTimeout: 5 * time.Second,
			Handler: func(_ context.Context, _ string, req []byte) ([]byte, error) {
				return req, nil
			}})
		c, client := pipeConn(srv)
		done := make(chan struct{})
		go func() {
			c.serve()
			close(done)
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_, _ = client.Write(append(append([]byte{}, handshake...), in...))
		_ = client.Close()
		<-done
		srv.Stop()
		assert.Empty(t, srv.conns)
	})
}

func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"1S", "99999999H", "0n", "12345678m", "", "S", "-1S", "1e3S", "１S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseTimeout(s)
		if err == nil {
			assert.GreaterOrEqual(t, int64(d), int64(0), "%q", s)
			assert.LessOrEqual(t, len(s), 9)
		}
	})
}
