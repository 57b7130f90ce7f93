package controlplane_test

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
)

// Why the servers' ports are picked here: a port that a listen on :0 found free and then released can be taken,
// before the server binds it, by any outgoing connection on the machine (the kernel draws both from the same
// ephemeral range, and this suite, kubectl and the tests running beside it make many loopback connections).
// CI saw it twice ("bind: address already in use", from etcd). A port below that range is never given to an
// outgoing connection; only a program binding that very port on purpose can still take it, and then the start
// is tried again.

// unusedPort returns a loopback TCP port below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range) that nothing has bound now.
func unusedPort(t *testing.T) int {
	t.Helper()
	low := 32768 // the kernel's default when the file cannot be read
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if fields := strings.Fields(string(data)); len(fields) == 2 {
			if n, err := strconv.Atoi(fields[0]); err == nil {
				low = n
			}
		}
	}
	require.Greater(t, low, 2048, "ip_local_port_range starts at %d: no room below it", low)
	for range 100 {
		port := low/2 + rand.IntN(low-low/2)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // bound by something else: try another
		}
		require.NoError(t, l.Close())
		return port
	}
	require.FailNow(t, "no free loopback port below the ephemeral range after 100 tries", "range start %d", low)
	return 0
}

// startEtcd starts an embedded etcd (go.etcd.io/etcd/server/v3, configured by k8s.io/apiserver's test helper:
// no fsync, errors-only logs, a data directory of t's) on two of unusedPort's ports, and returns its client
// URLs. It stops at the end of t.
func startEtcd(t *testing.T) []string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cfg := testserver.NewTestConfig(t)
		client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(unusedPort(t)))}
		peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(unusedPort(t)))}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil && attempt < 3 && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
			t.Logf("etcd: %v; starting it on other ports", err)
			continue
		}
		require.NoError(t, err, "embedded etcd on %s (peer %s)", client.Host, peer.Host)
		t.Cleanup(e.Close)
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			e.Server.Stop()
			require.FailNow(t, "embedded etcd not ready within 60 s")
		}
		go func() {
			if err := <-e.Err(); err != nil {
				t.Errorf("embedded etcd: %v", err)
			}
		}()
		return []string{client.String()}
	}
}
