package hooks

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"kubevirt.io/kubevirt/pkg/hooks/info"
	hooksv1alpha2 "kubevirt.io/kubevirt/pkg/hooks/v1alpha2"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

// shortTempDir keeps socket paths under the 107-byte sun_path limit (t.TempDir can be long).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hk")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

type running struct {
	srv  *Server
	conn *grpc.ClientConn
	done chan error
}

func startServer(t *testing.T, h Handler) *running {
	t.Helper()
	dir := shortTempDir(t)
	srv, err := New(Config{SocketDir: dir, SocketName: "t.sock", Name: "sriov-udn-binding", Handler: h, StopTimeout: 2 * time.Second, limits: quickHandshake()})
	require.NoError(t, err)
	require.NoError(t, srv.Listen())
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	conn, err := grpc.NewClient("unix://"+srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return &running{srv: srv, conn: conn, done: done}
}

// quickHandshake is DefaultLimits with a handshake timeout well under the tests' 2 s stop timeout: grpc-go's
// stop waits for connections in their handshake up to it.
func quickHandshake() *Limits {
	l := DefaultLimits()
	l.Handshake = 500 * time.Millisecond
	return &l
}

func (r *running) waitStopped(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
}

func TestInfo_ReportsNameVersionsAndHookPoints(t *testing.T) {
	r := startServer(t, PassThrough{})
	res, err := info.NewInfoClient(r.conn).Info(context.Background(), &info.InfoParams{})
	require.NoError(t, err)
	assert.Equal(t, "sriov-udn-binding", res.GetName())
	assert.Equal(t, []string{"v1alpha3", "v1alpha2"}, res.GetVersions())
	var points []string
	for _, p := range res.GetHookPoints() {
		points = append(points, p.GetName())
	}
	assert.ElementsMatch(t, []string{"OnDefineDomain", "PreCloudInitIso", "Shutdown"}, points)
}

// callbacks is one Callbacks version's client, reduced to the calls both versions have (v1alpha2 has no
// Shutdown), so that a test runs the same checks on every version virt-launcher may pick.
type callbacks struct {
	version         string
	onDefineDomain  func(ctx context.Context, vmi, domainXML []byte) ([]byte, error)
	preCloudInitIso func(ctx context.Context, vmi, data, legacy []byte) (outData, outLegacy []byte, err error)
}

// callbackVersions returns a client of every Callbacks version we serve (versions()), on conn.
func callbackVersions(conn *grpc.ClientConn) []callbacks {
	v3, v2 := hooksv1alpha3.NewCallbacksClient(conn), hooksv1alpha2.NewCallbacksClient(conn)
	return []callbacks{
		{
			version: hooksv1alpha3.Version,
			onDefineDomain: func(ctx context.Context, vmi, domainXML []byte) ([]byte, error) {
				res, err := v3.OnDefineDomain(ctx, &hooksv1alpha3.OnDefineDomainParams{Vmi: vmi, DomainXML: domainXML})
				return res.GetDomainXML(), err
			},
			preCloudInitIso: func(ctx context.Context, vmi, data, legacy []byte) ([]byte, []byte, error) {
				res, err := v3.PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{Vmi: vmi, CloudInitData: data, CloudInitNoCloudSource: legacy})
				return res.GetCloudInitData(), res.GetCloudInitNoCloudSource(), err
			},
		},
		{
			version: hooksv1alpha2.Version,
			onDefineDomain: func(ctx context.Context, vmi, domainXML []byte) ([]byte, error) {
				res, err := v2.OnDefineDomain(ctx, &hooksv1alpha2.OnDefineDomainParams{Vmi: vmi, DomainXML: domainXML})
				return res.GetDomainXML(), err
			},
			preCloudInitIso: func(ctx context.Context, vmi, data, legacy []byte) ([]byte, []byte, error) {
				res, err := v2.PreCloudInitIso(ctx, &hooksv1alpha2.PreCloudInitIsoParams{Vmi: vmi, CloudInitData: data, CloudInitNoCloudSource: legacy})
				return res.GetCloudInitData(), res.GetCloudInitNoCloudSource(), err
			},
		},
	}
}

func TestCallbackVersions_CoverEveryServedVersion(t *testing.T) {
	var got []string
	for _, c := range callbackVersions(nil) {
		got = append(got, c.version)
	}
	assert.Equal(t, versions(), got)
}

func TestCallbacks_BothVersionsPassThroughUnchanged(t *testing.T) {
	r := startServer(t, PassThrough{})
	ctx := context.Background()
	domain := []byte("<domain type='kvm'><name>x</name></domain>")
	data := []byte(`{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"i"},"UserData":"#cloud-config\n","NetworkData":"","DevicesData":null,"VolumeName":"cloudinitdisk"}`)
	legacy := []byte(`{"userData":"#cloud-config\n"}`)

	for _, c := range callbackVersions(r.conn) {
		t.Run(c.version, func(t *testing.T) {
			d, err := c.onDefineDomain(ctx, []byte("{}"), domain)
			require.NoError(t, err)
			assert.Equal(t, domain, d)
			gotData, gotLegacy, err := c.preCloudInitIso(ctx, []byte("{}"), data, legacy)
			require.NoError(t, err)
			assert.Equal(t, data, gotData)
			// The request's legacy copy is not decoded (codec.go), and no answer carries one: virt-launcher reads
			// it only when CloudInitData is not valid (manager.go preCloudInitIsoValidateResult), and ours is.
			assert.Empty(t, gotLegacy)
		})
	}
}

func TestShutdown_TwiceDoesNotBlockAndRemovesSocket(t *testing.T) {
	r := startServer(t, PassThrough{})
	client := hooksv1alpha3.NewCallbacksClient(r.conn)
	_, err := client.Shutdown(context.Background(), &hooksv1alpha3.ShutdownParams{})
	require.NoError(t, err)
	// The second call may race the stop: either it succeeds or the connection is gone; it must not hang.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = client.Shutdown(ctx, &hooksv1alpha3.ShutdownParams{})
	if err != nil {
		assert.NotEqual(t, codes.DeadlineExceeded, status.Code(err), "second Shutdown hung: %v", err)
	}
	r.srv.Stop() // and a stop after Shutdown is harmless too
	r.waitStopped(t)
	assert.NoFileExists(t, r.srv.Path())
}

type blockingHandler struct {
	PassThrough
	entered chan struct{}
}

func (h blockingHandler) PreCloudInitIso(ctx context.Context, _, _ []byte) ([]byte, error) {
	close(h.entered)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStop_WhileCallInFlight_CancelsCallAndStops(t *testing.T) {
	for i := range callbackVersions(nil) {
		t.Run(callbackVersions(nil)[i].version, func(t *testing.T) {
			h := blockingHandler{entered: make(chan struct{})}
			r := startServer(t, h)
			c := callbackVersions(r.conn)[i]
			callErr := make(chan error, 1)
			go func() {
				_, _, err := c.preCloudInitIso(context.Background(), nil, nil, nil)
				callErr <- err
			}()
			<-h.entered
			r.srv.Stop()
			r.waitStopped(t)
			err := <-callErr
			require.Error(t, err)
			assert.Contains(t, err.Error(), "context canceled")
			assert.NoFileExists(t, r.srv.Path())
		})
	}
}

type panicHandler struct{ PassThrough }

func (panicHandler) OnDefineDomain(context.Context, []byte, []byte) ([]byte, error) {
	panic("handler bug")
}

func TestPanicInHandler_ReturnsInternalErrorAndKeepsServing(t *testing.T) {
	r := startServer(t, panicHandler{})
	for _, c := range callbackVersions(r.conn) {
		t.Run(c.version, func(t *testing.T) {
			_, err := c.onDefineDomain(context.Background(), nil, []byte("<domain/>"))
			require.Error(t, err)
			assert.Equal(t, codes.Internal, status.Code(err))
			assert.Contains(t, err.Error(), "OnDefineDomain")

			res, err := info.NewInfoClient(r.conn).Info(context.Background(), &info.InfoParams{})
			require.NoError(t, err, "server must keep serving after a handler panic")
			assert.Equal(t, "sriov-udn-binding", res.GetName())
		})
	}
}

func TestListen_RemovesStaleSocket(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "t.sock")
	// A socket left by a crashed predecessor: bound, then the listener closed without unlinking.
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	require.FileExists(t, path)

	srv, err := New(Config{SocketDir: dir, SocketName: "t.sock", Name: "n", Handler: PassThrough{}})
	require.NoError(t, err)
	require.NoError(t, srv.Listen())
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, st.Mode().Type())
	assert.Equal(t, socketMode, st.Mode().Perm())
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	srv.Stop()
	require.NoError(t, <-done)
	assert.NoFileExists(t, path)
}

func TestListen_Errors(t *testing.T) {
	dir := shortTempDir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "isdir.sock"), 0o700))

	tests := []struct {
		name, dir, socket, want string
	}{
		{"missing socket dir", filepath.Join(dir, "absent"), "t.sock", "no such file or directory"},
		{"socket dir is a file", file, "t.sock", "is not a directory"},
		{"socket path is a directory", dir, "isdir.sock", "is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Config{SocketDir: tc.dir, SocketName: tc.socket, Name: "n", Handler: PassThrough{}})
			require.NoError(t, err)
			err = srv.Listen()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.dir)
		})
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	long := make([]byte, 120)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no handler", Config{SocketDir: "/tmp", SocketName: "a.sock", Name: "n"}, "no handler"},
		{"empty name", Config{SocketDir: "/tmp", SocketName: "a.sock", Handler: PassThrough{}}, "empty hook name"},
		{"empty socket", Config{SocketDir: "/tmp", Name: "n", Handler: PassThrough{}}, "empty socket name"},
		{"slash in socket", Config{SocketDir: "/tmp", SocketName: "../a.sock", Name: "n", Handler: PassThrough{}}, "plain file name"},
		{"control char", Config{SocketDir: "/tmp", SocketName: "a\n.sock", Name: "n", Handler: PassThrough{}}, "control characters"},
		{"too long", Config{SocketDir: "/tmp", SocketName: string(long), Name: "n", Handler: PassThrough{}}, "longer than"},
		{"empty dir", Config{SocketName: "a.sock", Name: "n", Handler: PassThrough{}}, "empty socket directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestServe_BeforeListenIsAnError(t *testing.T) {
	srv, err := New(Config{SocketDir: "/tmp", SocketName: "a.sock", Name: "n", Handler: PassThrough{}})
	require.NoError(t, err)
	err = srv.Serve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "before Listen")
}

func TestListen_LiveSocket_RefusedNamingThePath(t *testing.T) {
	r := startServer(t, PassThrough{})
	second, err := New(Config{SocketDir: filepath.Dir(r.srv.Path()), SocketName: "t.sock", Name: "n", Handler: PassThrough{}})
	require.NoError(t, err)
	err = second.Listen()
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("another process is listening on socket %q", r.srv.Path()))
	_, err = info.NewInfoClient(r.conn).Info(context.Background(), &info.InfoParams{})
	assert.NoError(t, err, "the first server still answers")
}

func TestServe_SocketReplacedByAnother_LeftInPlaceAtStop(t *testing.T) {
	r := startServer(t, PassThrough{})
	require.NoError(t, os.Remove(r.srv.Path()))
	other, err := net.Listen("unix", r.srv.Path())
	require.NoError(t, err)
	defer func() { _ = other.Close() }()
	r.srv.Stop()
	r.waitStopped(t)
	assert.FileExists(t, r.srv.Path(), "another process's socket was removed")
}

func TestStop_SilentClientConnected_StopsWithoutWaitingForIt(t *testing.T) {
	r := startServer(t, PassThrough{})
	conn, err := net.Dial("unix", r.srv.Path())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	// Make sure the server accepted it before stopping: a call on another connection completes after.
	_, err = info.NewInfoClient(r.conn).Info(context.Background(), &info.InfoParams{})
	require.NoError(t, err)
	start := time.Now()
	r.srv.Stop()
	r.waitStopped(t)
	assert.Less(t, time.Since(start), r.srv.cfg.StopTimeout, "the silent connection held the stop past its handshake limit")
}

// PassThrough is the Handler that changes nothing: the domain and the cloud-init data go back
// exactly as received: the transport tests' Handler.
type PassThrough struct{}

// OnDefineDomain returns domainXML unchanged.
func (PassThrough) OnDefineDomain(_ context.Context, _, domainXML []byte) ([]byte, error) {
	return domainXML, nil
}

// PreCloudInitIso returns cloudInitData unchanged.
func (PassThrough) PreCloudInitIso(_ context.Context, _, cloudInitData []byte) ([]byte, error) {
	return cloudInitData, nil
}
