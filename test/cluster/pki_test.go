package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block, path)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func TestPKI_CertificatesVerifyForTheirUse_TokensPerClient(t *testing.T) {
	p, err := newPKI(t.TempDir(), []net.IP{net.ParseIP(nodeIP)}, []string{"kubernetes.default.svc"})
	require.NoError(t, err)
	ca := readCert(t, p.path("ca.crt"))
	assert.True(t, ca.IsCA)
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	server := readCert(t, p.path("apiserver.crt"))
	_, err = server.Verify(x509.VerifyOptions{Roots: roots, DNSName: nodeIP, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "kube-apiserver's certificate serves the node address")
	_, err = server.Verify(x509.VerifyOptions{Roots: roots, DNSName: "kubernetes.default.svc"})
	require.NoError(t, err)
	_, err = server.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.org"})
	require.Error(t, err, "and no other name")

	proxy := readCert(t, p.path("front-proxy-client.crt"))
	assert.Equal(t, "front-proxy-client", proxy.Subject.CommonName, "the apiserver's --requestheader-allowed-names")
	_, err = proxy.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	csv, err := os.ReadFile(p.path("tokens.csv"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	require.Len(t, lines, len(clients()))
	assert.Contains(t, string(csv), ",system:node:"+NodeName+",kubelet,\"system:nodes\"", "kubelet is a node to the Node authorizer")
	seen := map[string]bool{}
	for _, c := range clients() {
		tok := p.tokens[c.name]
		assert.Len(t, tok, 32)
		assert.False(t, seen[tok], "tokens differ")
		seen[tok] = true
	}
	kc, err := p.kubeconfig("admin", "https://10.254.0.1:6443")
	require.NoError(t, err)
	text, err := os.ReadFile(kc)
	require.NoError(t, err)
	assert.Contains(t, string(text), p.tokens["admin"])
	_, err = p.kubeconfig("nobody", "https://10.254.0.1:6443")
	require.Error(t, err)
}
