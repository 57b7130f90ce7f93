package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki is the node's own certificate authority and the files the components read: the CA, the apiserver's
// serving certificate, the front-proxy client (virt-api is an aggregated apiserver and needs the requestheader
// configuration), the service-account signing key, and a token per client in the apiserver's token file.
type pki struct {
	dir    string
	tokens map[string]string // client name -> bearer token
}

// client is one identity of the token file: user, groups.
type client struct {
	name, user string
	groups     []string
}

// clients are the control plane's and the tests' identities. Kubelet is a node (Node authorizer), the others
// are the users Kubernetes' bootstrap RBAC knows.
func clients() []client {
	return []client{
		{"admin", "admin", []string{"system:masters"}},
		{"kube-controller-manager", "system:kube-controller-manager", nil},
		{"kube-scheduler", "system:kube-scheduler", nil},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}},
		{"kube-proxy", "system:kube-proxy", nil},
	}
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// newPKI writes the node's PKI into dir.
func newPKI(dir string, serverIPs []net.IP, serverNames []string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	p := &pki{dir: dir, tokens: map[string]string{}}
	caKey, caCert, err := issue("sriov-udn-cluster-ca", nil, nil, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := p.write("ca", caCert.Raw, caKey); err != nil {
		return nil, err
	}
	for _, leaf := range []struct {
		name, cn string
		usage    []x509.ExtKeyUsage
		ips      []net.IP
		dns      []string
	}{
		{"apiserver", "kube-apiserver", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, serverIPs, serverNames},
		{"front-proxy-client", "front-proxy-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil},
	} {
		key, cert, err := issue(leaf.cn, caCert, caKey, leaf.usage, leaf.ips, leaf.dns)
		if err != nil {
			return nil, err
		}
		if err := p.write(leaf.name, cert.Raw, key); err != nil {
			return nil, err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	if err := writePEM(p.path("sa.key"), "EC PRIVATE KEY", mustEC(saKey)); err != nil {
		return nil, err
	}
	var csv strings.Builder
	for _, c := range clients() {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("token for %s: %w", c.name, err)
		}
		p.tokens[c.name] = hex.EncodeToString(b)
		fmt.Fprintf(&csv, "%s,%s,%s,\"%s\"\n", p.tokens[c.name], c.user, c.name, strings.Join(c.groups, ","))
	}
	if err := os.WriteFile(p.path("tokens.csv"), []byte(csv.String()), 0o600); err != nil {
		return nil, fmt.Errorf("write token file: %w", err)
	}
	return p, nil
}

// kubeconfig writes <name>.kubeconfig for client name against server and returns its path.
func (p *pki) kubeconfig(name, server string) (string, error) {
	return p.kubeconfigFile(name+".kubeconfig", name, server)
}

// kubeconfigFile writes the kubeconfig file of client name against server and returns its path.
func (p *pki) kubeconfigFile(file, name, server string) (string, error) {
	token, ok := p.tokens[name]
	if !ok {
		return "", fmt.Errorf("kubeconfig: no client %q", name)
	}
	path := p.path(file)
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: node
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {token: %q}
contexts:
- name: node
  context: {cluster: node, user: %s}
current-context: node
`, server, p.path("ca.crt"), name, token, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

func (p *pki) write(name string, cert []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", cert); err != nil {
		return err
	}
	return writePEM(p.path(name+".key"), "EC PRIVATE KEY", mustEC(key))
}

func writePEM(path, kind string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func mustEC(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(fmt.Sprintf("marshal a P-256 key: %v", err)) // cannot fail for a key this package generated
	}
	return der
}

// issue makes a P-256 key and a certificate for it: self-signed (a CA) when parent is nil, else signed by parent.
func issue(cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("%s key: %w", cn, err)
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, nil, fmt.Errorf("%s serial: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usage,
		IPAddresses: ips, DNSNames: dns,
	}
	if parent == nil {
		tmpl.KeyUsage, tmpl.BasicConstraintsValid, tmpl.IsCA = x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature, true, true
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%s certificate: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("%s certificate: %w", cn, err)
	}
	return key, cert, nil
}
