package hooks

import (
	"net"
	"sync"
	"sync/atomic"
)

// trackingListener remembers every connection it accepted until that connection is closed, so a
// hard stop can close them all. gRPC's Stop alone cannot: it first waits for every connection
// still in its HTTP/2 handshake (grpc server.go stop: serveWG.Wait), and a client that connects and
// never sends the preface holds that wait for the whole connection timeout (120 s by default).
type trackingListener struct {
	net.Listener

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool // closeAll ran: a connection accepted after it is closed at once
}

func newTrackingListener(ln net.Listener) *trackingListener {
	return &trackingListener{Listener: ln, conns: map[*trackedConn]struct{}{}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, owner: l}
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.conns[tc] = struct{}{}
	}
	l.mu.Unlock()
	if closed {
		_ = c.Close()
	}
	return tc, nil
}

// closeAll closes every open accepted connection, and any accepted later.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[*trackedConn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// closeSilent closes the connections whose client never sent a byte: they carry no call, so a
// graceful stop has nothing to wait for on them.
func (l *trackingListener) closeSilent() {
	l.mu.Lock()
	var silent []*trackedConn
	for c := range l.conns {
		if !c.spoke.Load() {
			silent = append(silent, c)
		}
	}
	l.mu.Unlock()
	for _, c := range silent {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	owner *trackingListener
	once  sync.Once
	spoke atomic.Bool // the client sent at least one byte
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.spoke.Load() {
		c.spoke.Store(true)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.conns, c)
		c.owner.mu.Unlock()
	})
	return c.Conn.Close()
}
