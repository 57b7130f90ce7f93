package grpcwire

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Handler serves one call. method is the request's :path, "/package.Service/Method"; req is the request
// message, which the handler owns. It returns the response message, or an error: a *Status in its chain
// reaches the client as is, a context error as Canceled or DeadlineExceeded, anything else as Unknown.
// ctx ends when the call's deadline (grpc-timeout) passes, the client resets the stream, the connection
// closes, or Stop runs.
type Handler func(ctx context.Context, method string, req []byte) ([]byte, error)

// Defaults of Config's zero fields.
const (
	// DefaultMaxRecvMsgSize is gRPC's default receive limit.
	DefaultMaxRecvMsgSize = 4 << 20
	// DefaultHandshakeTimeout is gRPC's default connection timeout.
	DefaultHandshakeTimeout = 120 * time.Second
	// DefaultMaxConcurrentStreams bounds the calls in flight on one connection: 100, what grpc-go's client
	// assumes until the server's SETTINGS arrive, so that a burst on a new connection is never refused.
	DefaultMaxConcurrentStreams = 100
)

// Receive-side sizes: what this server announces and accepts.
const (
	// recvWindow is the flow-control window announced for each stream and for the connection: a 4 MiB
	// request crosses in a few round trips, and the window is topped up as soon as a quarter is used.
	recvWindow = 1 << 20
	// writeTimeout bounds one frame's write: a client that stops reading loses its connection instead of
	// holding the connection's writers, and with them a graceful stop.
	writeTimeout = 30 * time.Second
	// firstMsgBuffer is the buffer a request message starts in; it grows as the message arrives (grow).
	firstMsgBuffer = 64 << 10
	// maxHeaderBlock bounds one request's compressed header block (HEADERS plus CONTINUATION frames),
	// maxHeaderList its decoded fields (RFC 9113 section 6.5.2's accounting: name + value + 32 each).
	// grpc-go's client sends a few hundred bytes.
	maxHeaderBlock = 64 << 10
	maxHeaderList  = 16 << 10
)

// Config configures a Server.
type Config struct {
	Handler Handler
	// MaxRecvMsgSize bounds a request message; a larger one is refused with ResourceExhausted as soon
	// as its length prefix arrives, before any of it is buffered. 0 means DefaultMaxRecvMsgSize.
	MaxRecvMsgSize int
	// HandshakeTimeout bounds how long a new connection may take to send the client preface and its
	// first SETTINGS; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxConcurrentStreams bounds the calls in flight on one connection (announced in SETTINGS; more
	// are refused with REFUSED_STREAM). A call holds its place until its handler returns, even when the
	// client resets it. 0 means DefaultMaxConcurrentStreams.
	MaxConcurrentStreams uint32
	// OnRefused, if set, is told of each call answered before its handler ran: a message over
	// MaxRecvMsgSize, a malformed request. It runs on the connection's reader: it must not block.
	OnRefused func(method string, st *Status)
}

// ErrServerStopped is what Serve returns when it is called after Stop or GracefulStop.
var ErrServerStopped = errors.New("grpcwire: the server has been stopped")

// Server serves unary gRPC calls on the listeners given to Serve.
type Server struct {
	cfg Config

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	stopped   bool
	done      chan struct{} // closed when Stop or GracefulStop starts
	connsWG   sync.WaitGroup
}

// NewServer builds a Server; cfg.Handler must be set.
func NewServer(cfg Config) *Server {
	if cfg.MaxRecvMsgSize <= 0 {
		cfg.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	return &Server{cfg: cfg, listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}, done: make(chan struct{})}
}

// Serve accepts connections on ln and serves each on goroutines of its own until Stop or GracefulStop
// closes ln; it then returns nil. Any other accept error that is not temporary ends it with that error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerStopped
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()

	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isStopped() {
				return nil
			}
			var temp interface{ Temporary() bool }
			if errors.As(err, &temp) && temp.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-s.done:
					t.Stop()
				}
				continue
			}
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.connsWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// stop marks the server stopped, closes its listeners and returns its connections.
func (s *Server) stop() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.done)
	}
	for ln := range s.listeners {
		_ = ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// GracefulStop stops accepting, sends every connection a GOAWAY, and waits until every call in flight
// has been answered and every connection closed. Connections without calls close at once.
func (s *Server) GracefulStop() {
	for _, c := range s.stop() {
		c.goAway()
	}
	s.connsWG.Wait()
}

// Stop closes the listeners and every connection at once; the calls in flight see their context end.
// It returns when every connection's reader has finished; handlers still running then are not waited for.
func (s *Server) Stop() {
	for _, c := range s.stop() {
		c.close()
	}
	s.connsWG.Wait()
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connsWG.Done()
}
