package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/admission"
)

func TestWebhookFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    webhookConfig
		wantErr string
	}{
		{"defaults", []string{"--tls-cert-file=/c", "--tls-key-file=/k"}, webhookConfig{listen: ":8443", certFile: "/c", keyFile: "/k", rule: admission.Rule{ImageSubstring: "sriov-udn-binding"}}, ""},
		{"all", []string{"--listen=127.0.0.1:9443", "--tls-cert-file=/c", "--tls-key-file=/k", "--log-level=debug", "--image-substring=udn-vf"},
			webhookConfig{listen: "127.0.0.1:9443", certFile: "/c", keyFile: "/k", rule: admission.Rule{ImageSubstring: "udn-vf"}, logLevel: slog.LevelDebug}, ""},
		{"an empty image substring", []string{"--tls-cert-file=/c", "--tls-key-file=/k", "--image-substring= "}, webhookConfig{}, "invalid --image-substring: must not be empty"},
		{"no certificate", []string{"--tls-key-file=/k"}, webhookConfig{}, "--tls-cert-file and --tls-key-file are required"},
		{"no key", []string{"--tls-cert-file=/c"}, webhookConfig{}, "--tls-cert-file and --tls-key-file are required"},
		{"a bad level", []string{"--tls-cert-file=/c", "--tls-key-file=/k", "--log-level=loud"}, webhookConfig{}, `invalid --log-level "loud"`},
		{"an argument", []string{"--tls-cert-file=/c", "--tls-key-file=/k", "serve"}, webhookConfig{}, `unexpected argument "serve"`},
		{"an unknown flag", []string{"--socket-dir=/x"}, webhookConfig{}, "flag provided but not defined: -socket-dir"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWebhookFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"webhook"}, &stdout, &stderr), "the subcommand is dispatched and refuses no certificate")
	assert.Contains(t, stderr.String(), "sriov-udn-binding webhook: --tls-cert-file")
}

// The webhook's flags table in its doc page is its --help.
func TestWebhookFlagsTable_EqualsWebhookHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"webhook", "--help"}, &stdout, &stderr), "webhook --help: %s", stderr.String())
	got := helpFlags(t, stdout.String())
	want := tableFlags(t, filepath.Join("..", "..", "docs", "pod-info-webhook.md"), "## Flags")
	assert.Equal(t, got, want, "docs/pod-info-webhook.md flags against webhook --help:\n%s", stdout.String())
}

// writeKeyPair writes a self-signed certificate for 127.0.0.1 named cn, and its key, to dir; it returns a
// pool trusting it.
func writeKeyPair(t *testing.T, dir, cn string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// servedCN is the common name of the certificate a new TLS connection to addr is served.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads what is served
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestServeWebhook_ServesTLS12Plus_ReloadsTheCertificate_StopsOnCancel(t *testing.T) {
	dir := t.TempDir()
	pool := writeKeyPair(t, dir, "first")
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	certs := &certReloader{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), log: logger}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveWebhookOn(ctx, ln, certs, admission.Rule{ImageSubstring: admission.ImageMarker}, logger)
	}()

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + addr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok\n", string(body))

	resp, err = client.Post("https://"+addr+"/mutate", "application/json", strings.NewReader(
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE",`+
			`"object":{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"hook-sidecar-0","image":"x/sriov-udn-binding:v1"}]}}}}`))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"uid":"u1","allowed":true,"patch":`)

	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the refusal is the point
	assert.Error(t, err, "TLS 1.1 is refused")

	// A rotation: new files (kubelet swaps them in one rename; a later mtime here) are served on the next
	// handshake; a half-written pair keeps the last good one.
	assert.Equal(t, "first", servedCN(t, addr))
	writeKeyPair(t, dir, "second")
	later := time.Now().Add(time.Second)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "tls.crt"), later, later))
	assert.Equal(t, "second", servedCN(t, addr))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), []byte("half"), 0o600))
	assert.Equal(t, "second", servedCN(t, addr))
	assert.Contains(t, logs.String(), "serving certificate not reloaded, the previous one is served")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(shutdownGrace + 5*time.Second):
		t.Fatal("serveWebhookOn did not return after its context ended")
	}
	_, err = net.Dial("tcp", addr)
	assert.Error(t, err, "the listener is closed")
	assert.Contains(t, logs.String(), `"msg":"webhook stopped"`)
}

func TestServeWebhook_UnloadableKeyPair_FailsBeforeListening(t *testing.T) {
	dir := t.TempDir()
	cfg := webhookConfig{listen: "127.0.0.1:0", certFile: filepath.Join(dir, "missing.crt"), keyFile: filepath.Join(dir, "missing.key")}
	err := serveWebhook(context.Background(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	assert.Contains(t, err.Error(), "missing.crt")
}
