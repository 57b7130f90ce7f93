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
type answering struct{ data, domain []byte }

func (a answering) OnDefineDomain(context.Context, []byte, []byte) ([]byte, error) {
	return a.domain, nil
}

func (a answering) PreCloudInitIso(context.Context, []byte, []byte) ([]byte, error) {
	return a.data, nil
}

// testLimits are the transport limits with smaller sizes, cheaper to cross under -race; test/faults and
// test/hostile cross the real ones against the built binary.
func testLimits() *Limits {
	l := DefaultLimits()
	l.RequestBytes, l.CloudInitDecodeBytes, l.DecodeBytes = 10<<20, 5<<20, 5<<20
	l.BudgetBytes = l.StreamReserve() + 1<<20
	return &l
}

func startLogged(t *testing.T, h Handler) (*grpc.ClientConn, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv, err := New(Config{SocketDir: shortTempDir(t), SocketName: "t.sock", Name: "sriov-udn-binding", Handler: h,
		StopTimeout: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(logs, nil)), limits: testLimits()})
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

// logLine returns the last JSON log line with msg.
func logLine(t *testing.T, logs *syncBuffer, msg string) map[string]any {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `"msg":"`+msg+`"`) }, 5*time.Second, 5*time.Millisecond)
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	return line
}

func TestMaxRequestBytes_IsTheLargestLegalRequest(t *testing.T) {
	// Two Secrets of 1 MiB (user data, networkData), every byte escaped to 6, each sent twice, the VMI.
	assert.Equal(t, 24<<20+3<<20+64<<10, MaxRequestBytes)
	assert.Less(t, CloudInitDecodeBytes, MaxRequestBytes)
	// 1 MiB of Secret user data of '<', '>' and '&', sent twice, 6 bytes each, and a small networkData and VMI.
	assert.Greater(t, CloudInitDecodeBytes, 2*6<<20)
	// The largest OnDefineDomain: a domain filling virt-launcher's 4 MiB answer limit, and the VMI.
	assert.Greater(t, DecodeBytes, MaxAnswerBytes+vmiJSONBytes)
	l := DefaultLimits()
	assert.Equal(t, int64(CloudInitDecodeBytes)*5/2, l.StreamReserve(), "decoding the largest cloud-init request is the costliest stream")
	assert.Equal(t, l.StreamReserve()+1<<20, l.BudgetBytes)
}

// A request past gRPC's receive limit is refused by grpc-go from its length prefix; the status names the
// size and the limit, and the sidecar logs one line naming the hook.
func TestServer_RequestPastTheReceiveLimit_RefusedWithALogLine(t *testing.T) {
	conn, logs := startLogged(t, PassThrough{})
	limit := testLimits().RequestBytes
	big := bytes.Repeat([]byte("x"), limit+1)
	_, err := hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(context.Background(), &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: big})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), strconv.Itoa(limit))
	line := logLine(t, logs, "hook call refused")
	assert.Equal(t, "PreCloudInitIso", line["hook"])
	assert.Contains(t, line["error"], strconv.Itoa(limit+6), "the request's size (the field and its tag)")
}

// A request within the receive limit but past the decode limit is refused before protobuf copies it, with an
// answer and a log line that name the message, its fields, its size and the limit.
func TestServer_RequestPastTheDecodeLimit_RefusedNamingFieldsSizeAndLimit(t *testing.T) {
	conn, logs := startLogged(t, PassThrough{})
	limit := testLimits().CloudInitDecodeBytes
	data := bytes.Repeat([]byte("<"), limit) // what a user data of '<' is after virt-launcher's json.Marshal: 6x
	req := &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: data}
	_, err := hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(context.Background(), req)
	require.Error(t, err)
	msg := status.Convert(err).Message()
	for _, want := range []string{"kubevirt.hooks.v1alpha3.PreCloudInitIsoParams", "cloudInitData", "cloudInitNoCloudSource",
		strconv.Itoa(int(messageSize(req))) + " bytes", strconv.Itoa(limit) + " bytes", "user data and networkData"} {
		assert.Contains(t, msg, want)
	}
	line := logLine(t, logs, "hook call refused")
	assert.Equal(t, "PreCloudInitIso", line["hook"])
	assert.Contains(t, line["error"], "PreCloudInitIsoParams")
	assert.Contains(t, line["error"], strconv.Itoa(limit))

	// The same size on the other hook names that hook's message.
	_, err = hooksv1alpha3.NewCallbacksClient(conn).OnDefineDomain(context.Background(), &hooksv1alpha3.OnDefineDomainParams{DomainXML: data})
	require.Error(t, err)
	assert.Contains(t, status.Convert(err).Message(), "OnDefineDomainParams (fields domainXML, vmi)")
}

// An answer virt-launcher could not receive (over gRPC's default 4 MiB client limit) is the sidecar's
// error naming its size and the limit; a CloudInitData that fits goes back whole, alone.
func TestServer_AnswerPastVirtLaunchersLimit_RefusedNamingSizes(t *testing.T) {
	data := []byte(`{"UserData":"` + strings.Repeat("a", 3<<20) + `"}`)
	conn, logs := startLogged(t, answering{data: data, domain: bytes.Repeat([]byte("d"), MaxAnswerBytes)})
	client := hooksv1alpha3.NewCallbacksClient(conn)
	res, err := client.PreCloudInitIso(context.Background(), &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte(`{}`)})
	require.NoError(t, err)
	assert.Equal(t, data, res.GetCloudInitData())
	assert.Empty(t, res.GetCloudInitNoCloudSource(), "no legacy CloudInitNoCloudSource in the answer")

	_, err = client.OnDefineDomain(context.Background(), &hooksv1alpha3.OnDefineDomainParams{DomainXML: []byte("<domain/>")})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	msg := status.Convert(err).Message()
	assert.Contains(t, msg, strconv.Itoa(MaxAnswerBytes))
	assert.Contains(t, msg, "domain XML")
	assert.Contains(t, logs.String(), `"outcome":"error"`, "the hook call's own log line")

	// The same for a CloudInitData past the limit.
	conn, _ = startLogged(t, answering{data: bytes.Repeat([]byte("c"), MaxAnswerBytes)})
	_, err = hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(context.Background(), &hooksv1alpha3.PreCloudInitIsoParams{CloudInitData: []byte(`{}`)})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	msg = status.Convert(err).Message()
	assert.Contains(t, msg, strconv.Itoa(MaxAnswerBytes))
	assert.Contains(t, msg, "CloudInitData")
}
