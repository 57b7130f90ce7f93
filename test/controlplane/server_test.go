package controlplane_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// Paths relative to this package's directory (go test runs in it).
var (
	manifestsDir   = filepath.Join("..", "..", "manifests")
	manifestReadme = filepath.Join(manifestsDir, "README.md")
	topReadme      = filepath.Join("..", "..", "README.md")
	e2eTestdataDir = filepath.Join("..", "e2e", "testdata")
)

// cluster is a running kube-apiserver with its clients.
type cluster struct {
	config  *rest.Config
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	startup time.Duration
}

// readmeServerFlags returns the kube-apiserver flags that manifests/README.md tells users of Kubernetes
// 1.34/1.35 to set for the MutatingAdmissionPolicy, so that the server runs with what the README says, and
// only that; README.md "Deploying" must name the same flags.
func readmeServerFlags(t *testing.T) []string {
	t.Helper()
	flagsIn := func(file string) string {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		m := regexp.MustCompile("`(--feature-gates=[^`]+)`").FindSubmatch(data)
		require.NotNil(t, m, "%s: no `--feature-gates=... --runtime-config=...` for kube-apiserver", file)
		return string(m[1])
	}
	flags := flagsIn(manifestReadme)
	require.Equal(t, flags, flagsIn(topReadme), "README.md and %s must name the same kube-apiserver flags", manifestReadme)
	out := strings.Fields(flags)
	require.Len(t, out, 2, "%s: %q", manifestReadme, flags)
	return out
}

// startControlPlane starts etcd (embedded go.etcd.io/etcd/server/v3, through k8s.io/apiserver's test
// helper) and kube-apiserver v1.34.2 in this process, the way cmd/kube-apiserver runs it (options parsed
// from flags, completed, validated, app.Run), with the given feature flags on top of what any cluster
// needs (etcd, serving, a service-account key, an admin token). Both stop at the end of t.
//
// Not k8s.io/kubernetes' StartTestServer: its ktesting import registers klog's -v on the global flag set,
// which kubevirt.io/client-go/log registers too (init panics, "flag redefined: v").
func startControlPlane(t *testing.T, featureFlags []string) *cluster {
	t.Helper()
	// kube-apiserver logs every request and controller step at info level; keep its warnings and errors
	// (klog copies those to stderr at its default -stderrthreshold).
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	start := time.Now()
	etcdClient := testserver.RunEtcd(t, testserver.NewTestConfig(t))

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
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := listener.Addr().(*net.TCPAddr).Port
	require.NoError(t, listener.Close())

	flags := append([]string{
		"--etcd-servers=" + strings.Join(etcdClient.Endpoints(), ","),
		"--etcd-prefix=/" + uuid.NewString(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--service-cluster-ip-range=10.0.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + keyFile,
		"--service-account-signing-key-file=" + keyFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
	}, featureFlags...)

	opts := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range opts.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	require.NoError(t, fs.Parse(flags), "kube-apiserver %v", flags)
	// What the command's PersistentPreRunE does: apply --feature-gates and --emulated-version.
	require.NoError(t, opts.GenericServerRunOptions.ComponentGlobalsRegistry.Set())
	ctx, cancel := context.WithCancel(context.Background())
	completed, err := opts.Complete(ctx)
	require.NoError(t, err)
	require.Empty(t, completed.Validate(), "kube-apiserver %v", flags)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, completed) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "kube-apiserver stopped")
		case <-time.After(30 * time.Second):
			t.Error("kube-apiserver did not stop within 30 s")
		}
	})

	config := &rest.Config{
		Host:            "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, "certs", "apiserver.crt")},
		// The suite creates many objects quickly; client-go's default 5 QPS would make it wait for nothing.
		QPS: 500, Burst: 1000,
	}
	c := &cluster{config: config}
	c.kube, err = kubernetes.NewForConfig(config)
	require.NoError(t, err)
	c.dynamic, err = dynamic.NewForConfig(config)
	require.NoError(t, err)
	// Ready: every post-start hook ran (bootstrap RBAC, the default namespace, CRD informers).
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("kube-apiserver exited: %w", err)
		default:
		}
		body, err := c.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		last = string(body)
		if err != nil {
			last += err.Error()
		}
		return err == nil, nil
	})
	require.NoError(t, err, "kube-apiserver never ready: %s", last)
	c.startup = time.Since(start)
	t.Logf("etcd + kube-apiserver %v ready in %v", featureFlags, c.startup.Round(time.Millisecond))
	return c
}
