package hooks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

// maxSocketPath is the usable length of sockaddr_un.sun_path on Linux (108 bytes with the NUL).
const maxSocketPath = 107

// socketMode keeps the socket to the pod's user and group (virt-launcher runs as 107 with fsGroup 107).
const socketMode os.FileMode = 0o660

// DefaultStopTimeout bounds how long a stop waits for in-flight calls after cancelling them.
const DefaultStopTimeout = 5 * time.Second

// Config configures a Server.
type Config struct {
	SocketDir  string // must exist: KubeVirt mounts it (shared emptyDir, subPath = container name)
	SocketName string // base name, unique across all sidecars of the pod (manager de-duplicates by base name)
	Name       string // name reported by Info
	Handler    Handler
	Logger     *slog.Logger
	// StopTimeout bounds the graceful stop; 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// Budget bounds the bytes requests hold; servers of one process share one (NewBudget). Nil: the server
	// gets one of its own.
	Budget *Budget

	// limits replaces DefaultLimits when set (tests: smaller limits are cheaper to cross).
	limits *Limits
}

// Server serves Info and the Callbacks services (or, built by NewPlugin, the Plugin API's domain hook) on
// a unix socket, with grpc-go.
type Server struct {
	cfg  Config
	path string
	log  *slog.Logger

	grpc *grpc.Server
	ln   net.Listener
	// sock is the socket file this process created: at exit it removes the path only if that is
	// still this file (another instance may have replaced it).
	sock os.FileInfo

	// life is cancelled by Stop (or a failed Serve), so handlers waiting for data return at once.
	life    context.Context
	endLife context.CancelFunc
}

// New validates cfg and builds a Server for the hook protocol; it does not touch the file system.
func New(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("hooks: no handler configured")
	}
	if cfg.Name == "" {
		return nil, errors.New("hooks: empty hook name")
	}
	return newServer(cfg, func(s *Server, g *grpc.Server) {
		info.RegisterInfoServer(g, infoServer{name: cfg.Name})
		v3 := v1alpha3Server{handler: cfg.Handler, shutdown: s.Stop}
		hooksv1alpha3.RegisterCallbacksServer(g, v3)
		hooksv1alpha2.RegisterCallbacksServer(g, v1alpha2Server{v3: v3})
	})
}

// newServer checks the socket settings and builds a Server whose services register adds: the socket
// lifecycle, limits, interceptors and stop are the same for the hook protocol and the Plugin API.
func newServer(cfg Config, register func(*Server, *grpc.Server)) (*Server, error) {
	switch name := cfg.SocketName; {
	case name == "":
		return nil, errors.New("hooks: empty socket name")
	case strings.ContainsRune(name, '/') || name == "." || name == "..":
		return nil, fmt.Errorf("hooks: socket name %q must be a plain file name", name)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return nil, fmt.Errorf("hooks: socket name %q contains control characters", name)
	case cfg.SocketDir == "":
		return nil, errors.New("hooks: empty socket directory")
	}
	path := filepath.Join(cfg.SocketDir, cfg.SocketName)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("hooks: socket path %q is %d bytes, longer than the %d a unix socket allows", path, len(path), maxSocketPath)
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	limits := DefaultLimits()
	if cfg.limits != nil {
		limits = *cfg.limits
	}
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(limits, logger)
	}
	life, endLife := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, path: path, log: logger, life: life, endLife: endLife}
	s.grpc = grpc.NewServer(s.serverOptions(limits)...)
	register(s, s.grpc)
	return s, nil
}

// serverOptions are grpc-go's settings for a peer that may be hostile: the socket is shared with the
// compute container, and with restartPolicy Never an out-of-memory kill is never undone. docs/design.md
// "Transport limits" gives the bound they add up to.
func (s *Server) serverOptions(l Limits) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newRequestCodec(l)),
		grpc.MaxRecvMsgSize(l.RequestBytes),
		grpc.MaxSendMsgSize(MaxAnswerBytes + answerFramingBytes),
		grpc.MaxConcurrentStreams(l.StreamsPerConnection),
		grpc.MaxHeaderListSize(l.HeaderListBytes),
		// Every stream reserves its share of the process-wide budget before any of its data is read, and a
		// request that does not arrive in time is cancelled (budget.go).
		grpc.InTapHandle(s.cfg.Budget.tap),
		// Insecure, and each stream knows its connection, which gives its share back as it closes (budget.go).
		grpc.Creds(newConnCredentials()),
		// A client that connects and stays silent is dropped after this long instead of gRPC's 120 s;
		// grpc-go's stop waits for connections in their handshake, so this also bounds a stop.
		grpc.ConnectionTimeout(l.Handshake),
		// PINGs more often than MinTime, or with no call open, end the connection (GOAWAY too_many_pings).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.PingMinInterval}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.ConnectionIdle,
			MaxConnectionAge:      l.ConnectionAge,
			MaxConnectionAgeGrace: l.ConnectionAgeGrace,
		}),
		// Static windows: no BDP pings. gRPC still opens a stream's window to the announced message size
		// as it reads it (transport requestRead), so this bounds nothing by itself; the budget does.
		grpc.InitialWindowSize(l.Window),
		grpc.InitialConnWindowSize(l.Window),
		// One connection per call (virt-launcher's manager dials each time): a shared write buffer is
		// returned to the pool between writes instead of staying with an idle connection.
		grpc.SharedWriteBuffer(true),
		grpc.StatsHandler(&refusedLogger{log: s.log}),
		// The log line sees what the client got; a panic anywhere below is an Internal error.
		grpc.ChainUnaryInterceptor(logInterceptor(s.log), recoverInterceptor(s.log), s.cfg.Budget.interceptor, s.lifeInterceptor),
	}
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Listen removes a stale socket left by a crashed predecessor and listens. It refuses a socket that
// another process still listens on. The socket directory must exist: KubeVirt creates it; a missing
// one means the pod is not what we expect.
func (s *Server) Listen() error {
	st, err := os.Stat(s.cfg.SocketDir)
	if err != nil {
		return fmt.Errorf("hooks: socket directory %q: %w", s.cfg.SocketDir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("hooks: socket directory %q is not a directory", s.cfg.SocketDir)
	}
	if err := removeStale(s.path); err != nil {
		return err
	}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		return fmt.Errorf("hooks: listen on %q: %w", s.path, err)
	}
	// Go unlinks the path when the listener closes, whatever file is there by then; Serve removes
	// only the file this process created instead.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	sock, err := os.Lstat(s.path)
	if err == nil {
		err = os.Chmod(s.path, socketMode)
	}
	if err != nil {
		_ = ln.Close()
		_ = os.Remove(s.path)
		return fmt.Errorf("hooks: chmod socket %q: %w", s.path, err)
	}
	s.sock = sock
	s.ln = s.cfg.Budget.listener(ln)
	s.log.Info("listening", "socket", s.path)
	return nil
}

// staleProbeTimeout bounds the dial that tells a live socket from a stale one.
const staleProbeTimeout = time.Second

// removeStale deletes a leftover socket (or file) at path; a directory there is an error, and so is
// a socket that something still accepts connections on (a second instance must not take it over).
func removeStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hooks: inspect stale socket %q: %w", path, err)
	}
	if st.IsDir() {
		return fmt.Errorf("hooks: socket path %q is a directory", path)
	}
	if st.Mode().Type() == os.ModeSocket {
		conn, err := net.DialTimeout("unix", path, staleProbeTimeout)
		switch {
		case err == nil:
			_ = conn.Close()
			return fmt.Errorf("hooks: another process is listening on socket %q", path)
		case !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("hooks: probe existing socket %q: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hooks: remove stale socket %q: %w", path, err)
	}
	return nil
}

// Serve serves until Stop is called (by Shutdown, a signal, or the caller) or serving fails. It
// then cancels in-flight handlers, waits up to StopTimeout for them, and removes the socket.
func (s *Server) Serve() error {
	if s.ln == nil {
		return errors.New("hooks: Serve called before Listen")
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.grpc.Serve(s.ln) }()

	var err error
	select {
	case <-s.life.Done():
	case err = <-serveErr:
		if err != nil {
			err = fmt.Errorf("hooks: serve on %q: %w", s.path, err)
		}
	}
	s.endLife()
	s.gracefulStop()
	if rmErr := s.removeOwnSocket(); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	s.log.Info("stopped", "socket", s.path)
	return err
}

// removeOwnSocket removes the socket path if it is still the file Listen created.
func (s *Server) removeOwnSocket() error {
	cur, err := os.Lstat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hooks: inspect socket %q: %w", s.path, err)
	}
	if !os.SameFile(cur, s.sock) {
		s.log.Warn("socket path now holds another file, left in place", "socket", s.path)
		return nil
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hooks: remove socket %q: %w", s.path, err)
	}
	return nil
}

// gracefulStop lets calls in flight finish (their contexts are already cancelled: life) for up to
// StopTimeout, then closes every connection (a peer that stopped reading holds a graceful stop for
// ever). grpc-go's stop also waits for connections still in their handshake (server.go stop: serveWG),
// at most Limits.Handshake.
func (s *Server) gracefulStop() {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	timer := time.NewTimer(s.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.log.Warn("graceful stop timed out, closing connections", "timeout", s.cfg.StopTimeout)
		s.grpc.Stop()
		<-done
	}
}

// Stop asks Serve to return. It never blocks and may be called any number of times.
func (s *Server) Stop() { s.endLife() }

// lifeInterceptor cancels a call's context when the server stops, so a handler waiting for DownwardAPI
// data gives up instead of holding the graceful stop.
func (s *Server) lifeInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.life, cancel)
	defer stop()
	return handler(ctx, req)
}
