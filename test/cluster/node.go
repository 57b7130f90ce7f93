package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
)

const (
	// NodeName is the node's name, hostname and kubelet's --hostname-override.
	NodeName = "node1"
	// nodeIP is the node's address, on a veth pair inside its network namespace (the kernel has no dummy).
	nodeIP = "10.254.0.1"
	// apiserverPort and the other ports are the node network namespace's own: nothing of the host listens there.
	apiserverPort = 6443
	etcdClientURL = "http://127.0.0.1:2379"
	etcdPeerURL   = "http://127.0.0.1:2380"
	serviceCIDR   = "10.96.0.0/16"
	serviceIP     = "10.96.0.1"
	podCIDR       = "10.88.0.0/16"
	podCIDRv6     = "fd88::/64"
	// cgroupRoot is kubelet's cgroupRoot, made in every cgroup v1 hierarchy before kubelet starts and removed,
	// deepest first, after the node is gone.
	cgroupRoot = "sriov-udn-cluster"
)

// kernelDefaults are the sysctls kubelet writes with protectKernelDefaults false, and the values it wants: the
// node mounts files holding those values over them in its own mount namespace, so the host's stay as they are.
func kernelDefaults() map[string]string {
	return map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}
}

// Node is one running node: its work directory, PID 1 as the host sees it, and the components started in it.
type Node struct {
	Work    string // everything the node writes: state, logs, PKI
	bin     string // the Kubernetes binaries
	root    string // the trixie root of etcd and containerd
	init    *exec.Cmd
	pki     *pki
	started []*exec.Cmd
	logf    func(string, ...any)
	// Kubeconfig is the admin's kubeconfig; its server is reachable only from the node's network namespace
	// (Dial). HostKubeconfig makes one that any program of the host can use.
	Kubeconfig string
	forward    net.Listener // HostKubeconfig's, closed by Stop
}

// Paths is where the node's inputs are.
type Paths struct {
	Kubernetes string // directory of kube-apiserver, kubelet, ...
	Root       string // trixie root with containerd and etcd
	// CNIPlugin is test/cmd/cluster-cni, the stand-in for Multus and OVN-Kubernetes: the node's one CNI
	// network, which runs Debian's bridge and host-local plugins (/usr/lib/cni) and writes the pod's annotations.
	CNIPlugin []byte
	// Images are docker-archive tars imported into containerd before kubelet starts; one of them holds
	// PauseImage.
	Images []string
}

// Start brings up a node: namespaces, etcd and containerd, then the control plane and kubelet. On error the
// caller still calls Stop.
func Start(ctx context.Context, p Paths, logf func(string, ...any)) (*Node, error) {
	work, err := os.MkdirTemp("", "sriov-udn-cluster-")
	if err != nil {
		return nil, fmt.Errorf("node work dir: %w", err)
	}
	n := &Node{Work: work, bin: p.Kubernetes, root: p.Root, logf: logf}
	for _, d := range []string{"bin", "cni/bin", "logs", "varlib", "etcd", "containerd/root", "containerd/state", "containerd/opt", "cni/net.d", "cni/data", "sysctl/vm", "sysctl/kernel", "kubelet/pki", "podlogs", "volume-plugins"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return n, fmt.Errorf("node work dir: %w", err)
		}
	}
	if n.pki, err = newPKI(n.path("pki"), []net.IP{net.ParseIP(nodeIP), net.ParseIP(serviceIP), net.ParseIP("127.0.0.1")},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", NodeName}); err != nil {
		return n, err
	}
	if err := n.writeConfigs(); err != nil {
		return n, err
	}
	if err := os.Symlink(filepath.Join(n.root, "usr", "bin", "containerd-shim-runc-v2"), n.path("bin", "containerd-shim-runc-v2")); err != nil {
		return n, fmt.Errorf("containerd's shim: %w", err)
	}
	if err := n.cniBin(p.CNIPlugin); err != nil {
		return n, err
	}
	if err := makeCgroupRoot(); err != nil {
		return n, err
	}
	if err := n.startInit(ctx); err != nil {
		return n, err
	}
	for _, archive := range p.Images {
		if err := n.Import(archive); err != nil {
			return n, err
		}
	}
	if err := n.startControlPlane(ctx); err != nil {
		return n, err
	}
	return n, nil
}

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.Work}, elem...)...)
}

// initScript is the node's PID 1: it makes the node's mounts and network, starts etcd and containerd, marks the
// node ready and waits for ever. It runs in fresh PID, mount, network and UTS namespaces.
func (n *Node) initScript() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("#!/bin/sh")
	w("set -eu")
	w("mount --make-rslave /            # nothing mounted here reaches the host")
	w("mount -t proc proc /proc          # this PID namespace's processes")
	w("mount --make-rshared /            # kubelet's Bidirectional propagation works inside the node")
	w("mount -t tmpfs -o mode=755 tmpfs /run")
	w("mkdir -p /run/netns /run/lock")
	w("mount -t tmpfs -o mode=755 tmpfs /var/log")
	w("mount --bind %q /var/lib         # kubelet's and CNI's fixed paths under /var/lib stay in the work dir", n.path("varlib"))
	for key := range kernelDefaults() {
		w("mount --bind %q /proc/sys/%s", n.path("sysctl", key), key)
	}
	w("hostname %s", NodeName)
	w("ip link set lo up")
	w("ip link add node0 type veth peer name node1")
	w("ip addr add %s/24 dev node0", nodeIP)
	w("ip link set node0 up")
	w("ip link set node1 up")
	w("ip route add default dev node0")
	// Only containerd's shim comes from the trixie root through PATH (containerd finds it there): trixie's other
	// programs need a newer libc than the host's.
	w("export PATH=%q:$PATH", n.path("bin"))
	w("%q --name %s --data-dir %q --listen-client-urls %s --advertise-client-urls %s --listen-peer-urls %s --initial-advertise-peer-urls %s --initial-cluster %s=%s >%q 2>&1 &",
		filepath.Join(n.root, "usr", "bin", "etcd"), NodeName, n.path("etcd"), etcdClientURL, etcdClientURL, etcdPeerURL, etcdPeerURL, NodeName, etcdPeerURL, n.path("logs", "etcd.log"))
	w("%q --config %q >%q 2>&1 &", filepath.Join(n.root, "usr", "bin", "containerd"), n.path("containerd.toml"), n.path("logs", "containerd.log"))
	w("touch %q", n.path("init.ready"))
	w("while :; do wait || true; sleep 3600; done")
	return b.String()
}

// cniBin is containerd's CNI plugin directory: Debian's plugins, linked, and the stand-in, so that nothing is
// added to the host's /usr/lib/cni.
func (n *Node) cniBin(standIn []byte) error {
	plugins, err := os.ReadDir(debianCNIDir)
	if err != nil {
		return fmt.Errorf("the CNI plugins of Debian's containernetworking-plugins: %w", err)
	}
	for _, p := range plugins {
		if err := os.Symlink(filepath.Join(debianCNIDir, p.Name()), n.path("cni", "bin", p.Name())); err != nil {
			return fmt.Errorf("CNI plugin dir: %w", err)
		}
	}
	if err := os.WriteFile(n.path("cni", "bin", "cluster-cni"), standIn, 0o755); err != nil {
		return fmt.Errorf("CNI stand-in: %w", err)
	}
	return nil
}

// debianCNIDir is where Debian's containernetworking-plugins puts its plugins.
const debianCNIDir = "/usr/lib/cni"

func (n *Node) writeConfigs() error {
	for key, val := range kernelDefaults() {
		if err := os.WriteFile(n.path("sysctl", key), []byte(val+"\n"), 0o644); err != nil {
			return fmt.Errorf("node sysctl file: %w", err)
		}
	}
	files := map[string]string{
		"node-init.sh": n.initScript(),
		"resolv.conf":  "nameserver 127.0.0.1\n",
		"containerd.toml": fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  stream_server_address = "127.0.0.1"
  stream_server_port = "10010"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
			n.path("containerd", "opt"), PauseImage, n.path("cni", "bin"), n.path("cni", "net.d")),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
makeIPTablesUtilChains: false
protectKernelDefaults: false
resolvConf: %s
podLogsDir: %s
volumePluginDir: %s
registerNode: true
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 30
`, cgroupRoot, nodeIP, n.containerdSocket(), n.containerdSocket(), n.path("resolv.conf"), n.path("podlogs"), n.path("volume-plugins")),
	}
	var err error
	if n.Kubeconfig, err = n.pki.kubeconfig("admin", fmt.Sprintf("https://%s:%d", nodeIP, apiserverPort)); err != nil {
		return err
	}
	// The stand-in writes the pods' annotations as the admin: Multus and ovnkube-controller have their own
	// service accounts with that right.
	files[filepath.Join("cni", "net.d", "10-cluster.conflist")] = fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "cluster", "plugins": [
 {"type": "cluster-cni", "name": "cluster", "cniVersion": "1.0.0", "kubeconfig": %q, "pluginDir": %q, "dataDir": %q,
  "podNetwork": {"bridge": "cni0", "subnetV4": %q, "subnetV6": %q, "serviceSubnets": [%q]}}]}`,
		n.Kubeconfig, debianCNIDir, n.path("cni", "data"), podCIDR, podCIDRv6, serviceCIDR)
	for name, text := range files {
		if err := os.WriteFile(n.path(name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("node config %s: %w", name, err)
		}
	}
	return nil
}

func (n *Node) containerdSocket() string { return n.path("containerd", "containerd.sock") }

// startInit starts the node's PID 1 and waits until it started etcd and containerd.
func (n *Node) startInit(ctx context.Context) error {
	n.init = exec.Command("/bin/sh", n.path("node-init.sh"))
	n.init.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		// The node dies with the test process: with the thread that started it, strictly, so no goroutine may
		// end while locked to a thread (Dial).
		Pdeathsig: syscall.SIGKILL,
	}
	log, err := os.Create(n.path("logs", "init.log"))
	if err != nil {
		return fmt.Errorf("node init log: %w", err)
	}
	n.init.Stdout, n.init.Stderr = log, log
	if err := n.init.Start(); err != nil {
		return fmt.Errorf("start the node's init: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- n.init.Wait(); _ = log.Close() }()
	return n.waitFor(ctx, "the node's init, etcd and containerd", 30*time.Second, exited, func() error {
		if _, err := os.Stat(n.path("init.ready")); err != nil {
			return err
		}
		c, err := net.Dial("unix", n.containerdSocket())
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// waitFor polls ready every 100 ms until it returns nil, the timeout passes or exited reports the node's init
// gone; the error names what it waited for and the last reason.
func (n *Node) waitFor(ctx context.Context, what string, timeout time.Duration, exited <-chan error, ready func() error) error {
	return n.pollFor(ctx, what, timeout, 100*time.Millisecond, exited, ready)
}

// pollFor is waitFor polling every interval: for waits of minutes whose every poll runs kubectl.
func (n *Node) pollFor(ctx context.Context, what string, timeout, interval time.Duration, exited <-chan error, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("waiting for %s: the node's init exited (%v); see %s", what, err, n.path("logs", "init.log"))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// run starts a component inside the node's namespaces, its output in logs/<name>.log.
func (n *Node) run(name string, args ...string) error {
	log, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		return fmt.Errorf("%s log: %w", name, err)
	}
	pid := strconv.Itoa(n.init.Process.Pid)
	cmd := exec.Command("nsenter", append([]string{"-t", pid, "-p", "-n", "-m", "-u", "--"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); _ = log.Close() }()
	n.started = append(n.started, cmd)
	return nil
}

func (n *Node) startControlPlane(ctx context.Context) error {
	k := func(b string) string { return filepath.Join(n.bin, b) }
	pk := n.pki.path
	if err := n.run("kube-apiserver", k("kube-apiserver"),
		"--etcd-servers="+etcdClientURL, "--bind-address="+nodeIP, "--advertise-address="+nodeIP, "--secure-port="+strconv.Itoa(apiserverPort),
		"--tls-cert-file="+pk("apiserver.crt"), "--tls-private-key-file="+pk("apiserver.key"), "--client-ca-file="+pk("ca.crt"),
		"--kubelet-client-certificate="+pk("apiserver.crt"), "--kubelet-client-key="+pk("apiserver.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-cluster-ip-range="+serviceCIDR, "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pk("sa.key"), "--service-account-signing-key-file="+pk("sa.key"),
		"--token-auth-file="+pk("tokens.csv"), "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		// virt-api is an aggregated apiserver: without the requestheader settings it panics.
		"--requestheader-client-ca-file="+pk("ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User", "--proxy-client-cert-file="+pk("front-proxy-client.crt"),
		"--proxy-client-key-file="+pk("front-proxy-client.key"), "--enable-aggregator-routing=true",
		// Kubernetes 1.34 serves MutatingAdmissionPolicy as v1beta1, behind its gate (manifests/components/kubernetes-1.34-1.35).
		"--feature-gates=MutatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
	); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "kube-apiserver /readyz", 90*time.Second, nil, n.apiserverReady); err != nil {
		return err
	}
	// The scheduler and the controller manager exit when they start before the bootstrap RBAC exists: after /readyz.
	for _, c := range []struct{ name, port string }{{"kube-scheduler", "10259"}, {"kube-controller-manager", "10257"}} {
		kc, err := n.pki.kubeconfig(c.name, fmt.Sprintf("https://%s:%d", nodeIP, apiserverPort))
		if err != nil {
			return err
		}
		args := []string{k(c.name), "--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--secure-port=" + c.port, "--leader-elect=false"}
		if c.name == "kube-controller-manager" {
			args = append(args, "--service-account-private-key-file="+pk("sa.key"), "--root-ca-file="+pk("ca.crt"),
				"--use-service-account-credentials=true", "--service-cluster-ip-range="+serviceCIDR,
				"--cluster-signing-cert-file="+pk("ca.crt"), "--cluster-signing-key-file="+pk("ca.key"),
				// Its default is under the host's /usr, which the node's mount namespace does not hide.
				"--flex-volume-plugin-dir="+n.path("volume-plugins"))
		}
		if err := n.run(c.name, args...); err != nil {
			return err
		}
	}
	kubeletKC, err := n.pki.kubeconfig("kubelet", fmt.Sprintf("https://%s:%d", nodeIP, apiserverPort))
	if err != nil {
		return err
	}
	if err := n.run("kubelet", k("kubelet"), "--config="+n.path("kubelet.yaml"), "--kubeconfig="+kubeletKC,
		"--root-dir=/var/lib/kubelet", "--cert-dir="+n.path("kubelet", "pki"), "--hostname-override="+NodeName,
		"--node-ip="+nodeIP, "--v=2"); err != nil {
		return err
	}
	// The stand-in for Multus' dynamic networks controller (test/cmd/cluster-cni Hotplug): a network added to a
	// running pod's networks annotation is attached and published in network-status, as KubeVirt's NIC hot-plug
	// needs.
	if err := n.run("cluster-cni-hotplug", n.path("cni", "bin", "cluster-cni"), "hotplug", n.path("cni", "net.d", "10-cluster.conflist")); err != nil {
		return err
	}
	proxyKC, err := n.pki.kubeconfig("kube-proxy", fmt.Sprintf("https://%s:%d", nodeIP, apiserverPort))
	if err != nil {
		return err
	}
	return n.run("kube-proxy", k("kube-proxy"), "--kubeconfig="+proxyKC, "--hostname-override="+NodeName, "--proxy-mode=iptables",
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256", "--cluster-cidr="+podCIDR)
}

// apiserverReady is nil once kube-apiserver answers /readyz with ok.
func (n *Node) apiserverReady() error {
	ca, err := os.ReadFile(n.pki.path("ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: n.Dial, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/readyz", nodeIP, apiserverPort), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+n.pki.tokens["admin"])
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s: %s", resp.Status, body)
	}
	return nil
}

// Dial connects to addr from inside the node's network namespace: the apiserver listens on the node's address,
// which only that namespace has. It is client-go's rest.Config Dial.
func (n *Node) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread goes back to the host's namespace before it is unlocked. A goroutine that ends locked ends
		// its thread, and the node's init would then get its parent-death signal if that thread had started it.
		runtime.LockOSThread()
		host, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("this thread's network namespace: %w", err)}
			return
		}
		defer host.Close()
		target, err := netns.GetFromPid(n.init.Process.Pid)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("node network namespace: %w", err)}
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("enter the node network namespace: %w", err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if serr := netns.Set(host); serr == nil {
			runtime.UnlockOSThread() // else the thread stays locked and ends with this goroutine
		}
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// HostKubeconfig returns the path of an admin kubeconfig that any program on the host can use, kubectl or
// test/e2e's suite: its server is a listener on the host's loopback (a port the kernel picks) that carries each
// connection into the node's network namespace (Dial) to the apiserver. The apiserver's certificate names
// 127.0.0.1. The listener closes with Stop.
func (n *Node) HostKubeconfig() (string, error) {
	if n.forward == nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("the apiserver's forward on the host: %w", err)
		}
		n.forward = l
		go n.serveForward(l)
	}
	return n.pki.kubeconfigFile("admin-host.kubeconfig", "admin", "https://"+n.forward.Addr().String())
}

// serveForward copies each connection of l to the apiserver in the node's network namespace and back, until l
// is closed.
func (n *Node) serveForward(l net.Listener) {
	apiserver := net.JoinHostPort(nodeIP, strconv.Itoa(apiserverPort))
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return // closed by Stop
		}
		if err != nil {
			n.logf("cluster: the apiserver's forward: %v", err)
			continue
		}
		go func() {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			up, err := n.Dial(ctx, "tcp", apiserver)
			cancel()
			if err != nil {
				n.logf("cluster: the apiserver's forward: %v", err)
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, c)
				closeWrite(up)
				close(done)
			}()
			_, _ = io.Copy(c, up)
			closeWrite(c)
			<-done
		}()
	}
}

// closeWrite half-closes c where it can (a TCP connection), so that the other side sees the end of this one.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// KubectlBinary is the kubectl built with the node's Kubernetes.
func (n *Node) KubectlBinary() string { return filepath.Join(n.bin, "kubectl") }

// Stop kills the node (its PID 1, and with it every process of its PID namespace: the components, containerd,
// the containers), then removes kubelet's cgroups and the work directory unless keep is set.
func (n *Node) Stop(keep bool) error {
	var errs []error
	if n.forward != nil {
		_ = n.forward.Close()
	}
	if n.init != nil && n.init.Process != nil {
		_ = n.init.Process.Kill()
		deadline := time.Now().Add(30 * time.Second)
		for processAlive(n.init.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // the kernel reaps the namespace's processes after its init
		}
	}
	for _, c := range n.started {
		if c.Process != nil {
			_ = c.Process.Kill() // nsenter itself, in the host's namespaces
		}
	}
	if err := removeCgroupRoot(); err != nil {
		errs = append(errs, err)
	}
	if !keep && n.Work != "" {
		if err := os.RemoveAll(n.Work); err != nil {
			errs = append(errs, fmt.Errorf("remove the node's work dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// cgroupHierarchies are the host's cgroup v1 hierarchies (and the unified one, on a hybrid host).
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && (fields[2] == "cgroup" || fields[2] == "cgroup2") {
			out = append(out, fields[1])
		}
	}
	return out, sc.Err()
}

// makeCgroupRoot makes kubelet's cgroupRoot in every hierarchy; cpuset's needs cpus and mems copied from its
// parent before a task can join it.
func makeCgroupRoot() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("kubelet cgroupRoot: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("kubelet cgroupRoot %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes kubelet's cgroupRoot and everything kubelet made under it, deepest first.
func removeCgroupRoot() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// ContainerMemory is a container's memory as its cgroup (v1 memory controller) counts it.
type ContainerMemory struct {
	Usage, MaxUsage, Limit int64 // memory.usage_in_bytes, max_usage_in_bytes, limit_in_bytes
	RSS, Cache             int64 // memory.stat total_rss (anonymous), total_cache (page cache)
}

// ContainerMemory reads the memory cgroup of the container with the runtime's ID id (the containerID of a pod's
// container status without its "containerd://") under kubelet's cgroupRoot.
func (n *Node) ContainerMemory(id string) (ContainerMemory, error) {
	var m ContainerMemory
	dir, err := containerCgroup(id)
	if err != nil {
		return m, err
	}
	for f, v := range map[string]*int64{"memory.usage_in_bytes": &m.Usage, "memory.max_usage_in_bytes": &m.MaxUsage, "memory.limit_in_bytes": &m.Limit} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return m, fmt.Errorf("container %s: %w", id, err)
		}
		if *v, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return m, fmt.Errorf("container %s: %s: %w", id, f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return m, fmt.Errorf("container %s: %w", id, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "total_rss":
			m.RSS, _ = strconv.ParseInt(v, 10, 64)
		case "total_cache":
			m.Cache, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m, nil
}

// containerCgroup is the memory cgroup directory of the container with the runtime's ID id under kubelet's
// cgroupRoot.
func containerCgroup(id string) (string, error) {
	var dir string
	base := filepath.Join("/sys/fs/cgroup/memory", cgroupRoot)
	_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == id {
			dir = p
			return filepath.SkipAll
		}
		return nil
	})
	if dir == "" {
		return "", fmt.Errorf("no memory cgroup of container %s under %s", id, base)
	}
	return dir, nil
}
