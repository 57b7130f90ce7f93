package controlplane_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Paths relative to this package's directory (go test runs in it).
var (
	repoRoot       = filepath.Join("..", "..")
	manifestsDir   = filepath.Join(repoRoot, "manifests")
	installDoc     = filepath.Join(repoRoot, "docs", "install.md")
	e2eTestdataDir = filepath.Join("..", "e2e", "testdata")
)

// cluster is a running kube-apiserver with its clients.
type cluster struct {
	config  *rest.Config
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	startup time.Duration
	k8s     kubeVersion
	// installed is the kustomization docs/install.md had the user write and apply (set once its blocks ran).
	installed string
	// shellEnv is the environment the docs' blocks run with: kubectl (and oc) on PATH, a kubeconfig for this
	// server. Set once by docEnv.
	shellEnv []string
}

// docsServerFlags returns the kube-apiserver flags that docs/install.md (check 1) tells users of Kubernetes
// 1.34/1.35 to set for the MutatingAdmissionPolicy, so that the server runs with what the docs say, and
// only that.
func docsServerFlags(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(installDoc)
	require.NoError(t, err)
	m := regexp.MustCompile("`(--feature-gates=[^`]+)`").FindSubmatch(data)
	require.NotNil(t, m, "%s: no `--feature-gates=... --runtime-config=...` for kube-apiserver", installDoc)
	out := strings.Fields(string(m[1]))
	require.Len(t, out, 2, "%s: %q", installDoc, m[1])
	return out
}

// kubeVersion is one Kubernetes release the suite runs against: its kube-apiserver, the flags docs/install.md
// tells its users to start it with, and the kustomize component they add (docs/install.md "Kubernetes
// versions"). Every step of TestControlPlane runs on each.
type kubeVersion struct {
	name  string // the release, e.g. "1.34.2"
	minor string // "1.34": the docs' blocks marked controlplane-<minor> are for it
	// binaryEnv names a kube-apiserver built from module (a `tool` in its go.mod); `make test-controlplane`
	// builds each once for every KubeVirt version, since the server is the same whichever KubeVirt the tests
	// link. Unset, the suite builds it itself.
	binaryEnv, module string
	flags             func(*testing.T) []string // beyond what any cluster needs
	// mapVersion is the MutatingAdmissionPolicy API version the server serves at those flags.
	mapVersion string
	// component is the kustomize component its users add to any entry point ("": none).
	component string
}

const (
	kubeAPIServerEnv    = "SRIOV_UDN_KUBE_APISERVER"
	kubeAPIServer136Env = "SRIOV_UDN_KUBE_APISERVER_1_36"
)

// kubeVersions: 1.34 (MutatingAdmissionPolicy v1beta1, behind a gate: the oldest the docs support) and
// 1.36 (v1, GA, v1beta1 off: the first release users run without flags).
var kubeVersions = []kubeVersion{
	{
		name: "1.34.2", minor: "1.34", binaryEnv: kubeAPIServerEnv, module: kubernetesModule, flags: docsServerFlags,
		mapVersion: "v1beta1", component: filepath.Join(manifestsDir, "components", "kubernetes-1.34-1.35"),
	},
	{
		name: "1.36.3", minor: "1.36", binaryEnv: kubeAPIServer136Env, module: "kube-apiserver-v1.36",
		flags: func(*testing.T) []string { return nil }, mapVersion: "v1",
	},
}

// kubernetesModule is test/cluster's tools-only Kubernetes v1.34.2 module, whose kube-apiserver and kubectl
// this suite runs: the cluster runs the same build.
var kubernetesModule = filepath.Join("..", "cluster", "kubernetes")

// kubeVersionsEnv selects, by name and separated by spaces, the releases of kubeVersions a run covers; unset,
// it covers all. `make test` runs 1.34.2 in its main lane and 1.36.3 beside the guest boots, whose lane has
// room for 1.36.3's own build of Kubernetes (docs/development.md "CI").
const kubeVersionsEnv = "SRIOV_UDN_KUBE_VERSIONS"

// selectedKubeVersions are the releases of kubeVersions that kubeVersionsEnv selects; a name that is none of
// them fails the test.
func selectedKubeVersions(t *testing.T) []kubeVersion {
	t.Helper()
	names := strings.Fields(os.Getenv(kubeVersionsEnv))
	if len(names) == 0 {
		return kubeVersions
	}
	var out []kubeVersion
	for _, n := range names {
		i := slices.IndexFunc(kubeVersions, func(k kubeVersion) bool { return k.name == n })
		require.GreaterOrEqualf(t, i, 0, "%s=%q: no Kubernetes release %q in this suite", kubeVersionsEnv, os.Getenv(kubeVersionsEnv), n)
		out = append(out, kubeVersions[i])
	}
	return out
}

// kubeAPIServerBinary returns the kube-apiserver of k to run: $<binaryEnv>, or one built now from k's
// module (whichever -modfile the tests run with: the server does not depend on KubeVirt).
func kubeAPIServerBinary(t *testing.T, k kubeVersion) string {
	t.Helper()
	if bin := os.Getenv(k.binaryEnv); bin != "" {
		_, err := os.Stat(bin)
		require.NoErrorf(t, err, "%s", k.binaryEnv)
		return bin
	}
	bin := filepath.Join(t.TempDir(), "kube-apiserver")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "k8s.io/kubernetes/cmd/kube-apiserver")
	cmd.Dir = k.module
	out, err := cmd.CombinedOutput()
	require.NoErrorf(t, err, "go build k8s.io/kubernetes/cmd/kube-apiserver in %s (set %s to skip):\n%s", k.module, k.binaryEnv, out)
	t.Logf("built kube-apiserver %s in %v (%s unset)", k.name, time.Since(start).Round(time.Second), k.binaryEnv)
	return bin
}

// startControlPlane starts etcd (embedded go.etcd.io/etcd/server/v3, through k8s.io/apiserver's test
// helper) in this process and k's kube-apiserver (cmd/kube-apiserver, kubeAPIServerBinary) as a child
// process, with k's flags on top of what any cluster needs (etcd, serving, a service-account key, an admin
// token). Both stop at the end of t. The server's own log (every request at info level) goes to a file whose
// tail a failure shows.
func startControlPlane(t *testing.T, k kubeVersion) *cluster {
	t.Helper()
	bin := kubeAPIServerBinary(t, k)
	featureFlags := k.flags(t)
	start := time.Now()
	etcdEndpoints := startEtcd(t)

	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "sa.key")
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	token := uuid.NewString()
	tokenFile := filepath.Join(dir, "tokens.csv")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600))
	// The serving certificate, made here (as kube-apiserver would under --cert-dir) so that the clients can
	// trust it before the server is up; its PEM holds the certificate and the CA that signed it.
	certPEM, certKeyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	require.NoError(t, err)
	certFile, certKeyFile := filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(certKeyFile, certKeyPEM, 0o600))
	flags := append([]string{
		"--etcd-servers=" + strings.Join(etcdEndpoints, ","),
		"--etcd-prefix=/" + uuid.NewString(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + certKeyFile,
		"--service-cluster-ip-range=10.0.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + keyFile,
		"--service-account-signing-key-file=" + keyFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
	}, featureFlags...)

	// The port is one no outgoing connection can hold (unusedPort); should another program still bind it first,
	// the server exits saying so, and it starts again on another.
	var c *cluster
	for attempt := 1; ; attempt++ {
		var taken bool
		c, taken = launchAPIServer(t, bin, flags, token, certFile, filepath.Join(dir, fmt.Sprintf("kube-apiserver-%d.log", attempt)))
		if !taken {
			break
		}
		require.Less(t, attempt, 3, "kube-apiserver found its port taken %d times", attempt)
	}
	c.k8s = k
	c.startup = time.Since(start)
	t.Logf("etcd + kube-apiserver %s %v ready in %v", k.name, featureFlags, c.startup.Round(time.Millisecond))
	return c
}

// launchAPIServer starts bin with flags on a port of unusedPort's, logging to logPath, and waits until it is
// ready. taken says that it exited because another program had bound its port first (then nothing of it is
// left to stop); any other failure ends t. The server stops at the end of t.
func launchAPIServer(t *testing.T, bin string, flags []string, token, certFile, logPath string) (c *cluster, taken bool) {
	t.Helper()
	port := unusedPort(t)
	flags = append([]string{"--secure-port=" + strconv.Itoa(port)}, flags...)
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(bin, flags...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start(), "kube-apiserver %v", flags)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	logTail := func() string { return tail(logPath, 30) }
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			assert.NoError(t, err, "kube-apiserver stopped; its log ends:\n%s", logTail())
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("kube-apiserver did not stop within 60 s of SIGTERM; its log ends:\n%s", logTail())
		}
	}

	config := &rest.Config{
		Host:            "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: certFile},
		// The suite creates many objects quickly; client-go's default 5 QPS would make it wait for nothing.
		QPS: 500, Burst: 1000,
	}
	c = &cluster{config: config}
	c.kube, err = kubernetes.NewForConfig(config)
	require.NoError(t, err)
	c.dynamic, err = dynamic.NewForConfig(config)
	require.NoError(t, err)
	// Ready: every post-start hook ran (bootstrap RBAC, the default namespace, CRD informers).
	var last string
	exited := false
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			exited = true
			return false, fmt.Errorf("kube-apiserver exited (%v); its log ends:\n%s", err, logTail())
		default:
		}
		body, err := c.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		last = string(body)
		if err != nil {
			last += err.Error()
		}
		return err == nil, nil
	})
	if exited && strings.Contains(logTail(), "address already in use") {
		t.Logf("kube-apiserver: port %d was taken before it bound it; starting it on another", port)
		return nil, true
	}
	if !exited {
		t.Cleanup(stop)
	}
	require.NoError(t, err, "kube-apiserver never ready: %s", last)
	return c, false
}

// tail returns the last n lines of the file at path (or why it cannot be read).
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
