package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Budget bounds, for the whole process, the bytes that requests hold: partly received messages, decoded
// requests while their hook runs, and answers until their stream ends. gRPC has no such bound of its own:
// it grants a stream a window as large as the message it announces (up to MaxRecvMsgSize) and keeps what
// arrives until the message is whole, so many streams that each hold a part of a message take the sidecar
// past any memory limit (docs/footprint.md "Figures behind the code").
//
// Where it lives: gRPC's tap (grpc.InTapHandle) runs when a stream's headers arrive, before any of its
// data is read. There each stream reserves Limits.StreamReserve, the most it can cost; a stream that does
// not fit is refused (ResourceExhausted) without a byte of its data being kept, and one whose request does
// not arrive within Limits.ReceiveTimeout is cancelled, which frees its share. When the request has arrived
// and decoded, the first interceptor shrinks the reservation to the request's size, and after the hook to
// the answer's; the stream's end (its context) returns it. The listener cannot see messages, the codec sees
// them only once they are whole, and the flow-control windows bound nothing (see serverOptions).
//
// virt-launcher makes one call at a time to a sidecar, so one reservation at the largest size is its need.
//
// It also holds the process's connection slots (Limits.Connections), shared by the hook and the Plugin API
// sockets: an answer left queued behind a peer's closed window is past the byte budget (see
// Limits.StreamsPerConnection), and the slots bound how many there can be.
type Budget struct {
	limit, reserve int64
	timeout        time.Duration
	log            *slog.Logger
	slots          *semaphore.Weighted

	mu      sync.Mutex
	held    int64
	refused int                       // refusals since the budget last had room, logged when it has again
	live    map[*reservation]struct{} // the reservations not yet released
}

// NewBudget returns a budget of limits.BudgetBytes, reserving limits.StreamReserve() per stream.
func NewBudget(limits Limits, logger *slog.Logger) *Budget {
	return &Budget{limit: limits.BudgetBytes, reserve: limits.StreamReserve(), timeout: limits.ReceiveTimeout, log: logger,
		slots: semaphore.NewWeighted(int64(max(limits.Connections, 1))), live: map[*reservation]struct{}{}}
}

// listener accepts from ln while the process holds fewer connections than its slots; the next connection
// waits in the listen backlog until one closes (an idle or silent one does, within the limits). It is
// golang.org/x/net/netutil's LimitListener, whose slots belong to one listener, with the slots a semaphore
// that every socket of the process shares.
func (b *Budget) listener(ln net.Listener) net.Listener {
	closed, closeFn := context.WithCancel(context.Background())
	return &limitListener{Listener: ln, slots: b.slots, closed: closed, close: closeFn}
}

type limitListener struct {
	net.Listener
	slots  *semaphore.Weighted
	closed context.Context // done once Close is called: an Accept waiting for a slot returns
	close  context.CancelFunc
}

func (l *limitListener) Accept() (net.Conn, error) {
	if l.slots.Acquire(l.closed, 1) != nil {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.slots.Release(1)
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.slots.Release(1) }), streams: map[*reservation]struct{}{}}, nil
}

func (l *limitListener) Close() error {
	l.close()
	return l.Listener.Close()
}

// limitedConn gives its slot back on its first Close, and first the shares of its streams (connCredentials).
type limitedConn struct {
	net.Conn
	release func()

	mu      sync.Mutex
	streams map[*reservation]struct{} // nil once closed
}

func (c *limitedConn) Close() error {
	defer c.release()
	c.mu.Lock()
	streams := c.streams
	c.streams = nil
	c.mu.Unlock()
	for r := range streams {
		r.release()
	}
	return c.Conn.Close()
}

// track ties r to the connection, whose Close releases it; false when the connection is closed already.
func (c *limitedConn) track(r *reservation) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams == nil {
		return false
	}
	c.streams[r] = struct{}{}
	return true
}

func (c *limitedConn) untrack(r *reservation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, r)
}

// connCredentials are the insecure credentials (a unix socket inside the pod: nothing to authenticate or
// encrypt) with one addition: each connection's AuthInfo names the connection, so that tap can tie a stream's
// share to it. grpc-go closes a connection's socket before it cancels the connection's streams
// (http2Server.Close), so a peer that sees its connection end can call again before those streams end; with
// the shares given back in limitedConn.Close, they are back before the socket closes.
type connCredentials struct {
	credentials.TransportCredentials
}

func newConnCredentials() credentials.TransportCredentials {
	return connCredentials{insecure.NewCredentials()}
}

func (c connCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	lc, _ := conn.(*limitedConn)
	return conn, connInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, conn: lc}, nil
}

func (c connCredentials) Clone() credentials.TransportCredentials { return c }

// connInfo is a connection's AuthInfo: insecure, as grpc-go's own, and the connection.
type connInfo struct {
	credentials.CommonAuthInfo
	conn *limitedConn
}

func (connInfo) AuthType() string { return "insecure" }

// Held is what reservations hold now (tests, the bench).
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// errReceiveTimeout is the cause of a stream cancelled because its request did not arrive in time.
var errReceiveTimeout = errors.New("request not received in time")

type reservationKey struct{}

// reservation is one stream's share of the budget; n and released are guarded by b.mu.
type reservation struct {
	b      *Budget
	conn   *limitedConn // the stream's connection, when its credentials name it
	method string
	timer  *time.Timer     // the receive deadline, stopped when the request is whole
	ctx    context.Context // the stream's: once it is done, the share may be taken back (reapLocked)

	n        int64
	released bool
}

// tap reserves a share for a new stream, or refuses it. It runs in the connection's reader goroutine
// under the transport's lock (grpc-go http2_server.go operateHeaders), so it must never block.
func (b *Budget) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !b.acquire(b.reserve) {
		return ctx, status.Errorf(codes.ResourceExhausted, "%s refused: requests in flight hold %d of the sidecar's %d-byte budget "+
			"and a new one needs %d (the sidecar serves one call at a time at the largest size)",
			path.Base(info.FullMethodName), b.Held(), b.limit, b.reserve)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r := &reservation{b: b, method: info.FullMethodName, n: b.reserve, ctx: ctx}
	b.mu.Lock()
	b.live[r] = struct{}{}
	b.mu.Unlock()
	r.timer = time.AfterFunc(b.timeout, func() {
		b.log.Warn("hook call refused", "hook", path.Base(r.method), "service", path.Dir(r.method),
			"error", fmt.Sprintf("the request did not arrive within %s of its headers", b.timeout))
		cancel(errReceiveTimeout)
	})
	// The stream's context ends with the stream (grpc-go cancels it in closeStream and finishStream), and
	// with every stream of a connection that closes; the connection's Close gives the share back first.
	if p, ok := peer.FromContext(ctx); ok {
		if ci, ok := p.AuthInfo.(connInfo); ok && ci.conn != nil {
			r.conn = ci.conn
			if !r.conn.track(r) { // closed already: the stream is ending
				r.release()
			}
		}
	}
	context.AfterFunc(ctx, r.release)
	return context.WithValue(ctx, reservationKey{}, r), nil
}

// interceptor runs first on every call whose request arrived and decoded: it stops the receive deadline and
// keeps what the request, and then the answer, hold.
func (b *Budget) interceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r, _ := ctx.Value(reservationKey{}).(*reservation)
	if r == nil { // a server without this budget's tap (cannot happen in newServer): nothing to account
		return handler(ctx, req)
	}
	if !r.timer.Stop() {
		return nil, status.Errorf(codes.DeadlineExceeded, "%s: the request did not arrive within %s", path.Base(r.method), b.timeout)
	}
	r.resize(messageSize(req), false)
	resp, err := handler(ctx, req)
	if err != nil {
		r.resize(0, false)
		return nil, err
	}
	r.resize(messageSize(resp), false)
	return resp, nil
}

func (b *Budget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.limit {
		b.reapLocked()
	}
	if b.held+n > b.limit {
		b.refused++
		if b.refused == 1 {
			b.log.Warn("request budget full, refusing new calls", "held", b.held, "budget", b.limit, "need", n)
		}
		return false
	}
	b.held += n
	return true
}

// reapLocked takes back, under b.mu, the share of every stream that has ended but whose release has not run
// yet. grpc-go closes a connection's socket before it cancels the connection's streams, and context.AfterFunc
// runs the release in a goroutine of its own: a peer that sees the socket close can connect and call again
// before a dead stream's share is back, and would be refused for the bytes of a stream that no longer exists.
func (b *Budget) reapLocked() {
	for r := range b.live {
		if r.ctx.Err() != nil {
			b.held -= r.n
			r.n, r.released = 0, true
			delete(b.live, r)
		}
	}
}

// resize makes the reservation n bytes, and with release returns it for good. A larger n is taken even
// past the limit (the bytes exist already), and only delays the next stream. The first time the budget
// has room after refusals, it says how many there were.
func (r *reservation) resize(n int64, release bool) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.released {
		return
	}
	b.held += n - r.n
	r.n, r.released = n, release
	if release {
		delete(b.live, r)
	}
	if b.refused > 0 && b.held+b.reserve <= b.limit {
		b.log.Info("request budget has room again", "refused", b.refused, "held", b.held, "budget", b.limit)
		b.refused = 0
	}
}

func (r *reservation) release() {
	r.timer.Stop()
	r.resize(0, true)
	if r.conn != nil {
		r.conn.untrack(r)
	}
}

// messageSize is a request's or an answer's encoded size (protobuf computes it from the fields' lengths).
func messageSize(m any) int64 { return int64(proto.Size(protoMessage(m))) }

// protoMessage is m as a protobuf message (gRPC hands over messages of either API), or nil.
func protoMessage(m any) proto.Message {
	switch m := m.(type) {
	case protoadapt.MessageV2:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}
