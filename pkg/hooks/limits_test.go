package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// answering is a handler that answers with fixed payloads.
type answering struct{ data, source, domain []byte }

func (a answering) OnDefineDomain(context.Context, []byte, []byte) ([]byte, error) {
	return a.domain, nil
}

func (a answering) PreCloudInitIso(context.Context, []byte, []byte, []byte) ([]byte, []byte, error) {
	return a.data, a.source, nil
}

// testRequestLimit stands in for MaxRequestBytes where crossing it should be cheap (-race); test/faults
// crosses the real one against the built binary.
const testRequestLimit = 6 << 20

func startLogged(t *testing.T, h Handler) (*grpc.ClientConn, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv, err := New(Config{SocketDir: shortTempDir(t), SocketName: "t.sock", Name: "sriov-udn-binding", Handler: h,
		StopTimeout: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(logs, nil)), maxRequestBytes: testRequestLimit})
	require.NoError(t, err)
	require.NoError(t, srv.Listen())
	go func() { _ = srv.Serve() }()
	// Sends up to 64 MiB, as virt-launcher's client does (gRPC's default send limit is unbounded).
	conn, err := grpc.NewClient("unix://"+srv.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(); srv.Stop() })
	return conn, logs
}

func TestMaxRequestBytes_IsTheLargestLegalRequest(t *testing.T) {
	// Two Secrets of 1 MiB (user data, networkData), every byte escaped to 6, each sent twice, the VMI.
	assert.Equal(t, 24<<20+3<<20+64<<10, MaxRequestBytes)
}

// Issue 30, defect 1: a request past the limit is refused by the sidecar's own gRPC server, which logs one
// line naming the hook and the limit; the status names the size and the limit.
func TestServer_RequestPastTheLimit_RefusedWithALogLine(t *testing.T) {
	conn, logs := startLogged(t, PassThrough{})
	big := bytes.Repeat([]byte("x"), testRequestLimit+1)
	_, err := hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(context.Background(), &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: big})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), strconv.Itoa(testRequestLimit))
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "hook call refused") }, 5*time.Second, 10*time.Millisecond)
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "hook call refused") {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	assert.Equal(t, "PreCloudInitIso", line["hook"])
	assert.EqualValues(t, testRequestLimit, line["limit"])
	assert.Contains(t, line["error"], strconv.Itoa(testRequestLimit+6))

	// Past gRPC's 4 MiB default, within ours: decoded and handled (PassThrough then answers with it all,
	// which is past what virt-launcher receives: the sidecar's own error says so).
	within := append([]byte(`{"UserData":"`), bytes.Repeat([]byte("a"), 4<<20+64<<10)...)
	within = append(within, `"}`...)
	_, err = hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(context.Background(), &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: within})
	require.Error(t, err)
	assert.NotContains(t, status.Convert(err).Message(), "larger than max")
	assert.Contains(t, status.Convert(err).Message(), "the answer's CloudInitData is")
}

// An answer virt-launcher could not receive (over gRPC's default 4 MiB client limit) is the sidecar's
// error naming its size and the limit; an echo that would push it over is dropped.
func TestServer_AnswerPastVirtLaunchersLimit_RefusedNamingSizes(t *testing.T) {
	data := []byte(`{"UserData":"` + strings.Repeat("a", 3<<20) + `"}`)
	conn, logs := startLogged(t, answering{data: data, source: data, domain: bytes.Repeat([]byte("d"), MaxAnswerBytes)})
	client := hooksv1alpha3.NewCallbacksClient(conn)
	res, err := client.PreCloudInitIso(context.Background(), &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte(`{}`)})
	require.NoError(t, err)
	assert.Equal(t, data, res.GetCloudInitData())
	assert.Empty(t, res.GetCloudInitNoCloudSource(), "the echo would not fit: dropped (virt-launcher reads it only without UserData)")

	_, err = client.OnDefineDomain(context.Background(), &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>")})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	msg := status.Convert(err).Message()
	assert.Contains(t, msg, strconv.Itoa(MaxAnswerBytes))
	assert.Contains(t, msg, "domain XML")
	assert.Contains(t, logs.String(), `"outcome":"error"`, "the hook call's own log line")
}
