package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// memCluster is the tests' Cluster: pods and NADs in memory; a patch merges into the stored pod.
type memCluster struct {
	mu      sync.Mutex
	pods    map[string]*corev1.Pod
	nads    map[string]*nadv1.NetworkAttachmentDefinition
	patches int
	// patchErr, when set, is what PatchPodAnnotations returns (an apiserver refusing the patch).
	patchErr error
}

func newMemCluster() *memCluster {
	return &memCluster{pods: map[string]*corev1.Pod{}, nads: map[string]*nadv1.NetworkAttachmentDefinition{}}
}

func (m *memCluster) addPod(p *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[p.Namespace+"/"+p.Name] = p.DeepCopy()
}

func (m *memCluster) addNAD(ns, name, config string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nads[ns+"/"+name] = &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

func (m *memCluster) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pods[ns+"/"+name]
	if !ok {
		return nil, withCode(codeAPIServer, fmt.Errorf("get pod %s/%s: not found", ns, name))
	}
	return p.DeepCopy(), nil
}

func (m *memCluster) NAD(_ context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nads[ns+"/"+name]
	if !ok {
		return nil, withCode(codeAPIServer, fmt.Errorf("get NetworkAttachmentDefinition %s/%s: not found", ns, name))
	}
	return n.DeepCopy(), nil
}

func (m *memCluster) PatchPodAnnotations(_ context.Context, ns, name string, ann map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.patchErr != nil {
		return m.patchErr
	}
	p, ok := m.pods[ns+"/"+name]
	if !ok {
		return fmt.Errorf("patch pod %s/%s: not found", ns, name)
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	for k, v := range ann {
		p.Annotations[k] = v
	}
	m.patches++
	return nil
}

const pluginDir = "/usr/lib/cni"

// requireNetns skips unless the test can make network namespaces and the Debian plugins are installed.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, a bridge and TAP devices (CI runs as root)")
	}
	for _, p := range []string{"bridge", "host-local"} {
		if _, err := os.Stat(filepath.Join(pluginDir, p)); err != nil {
			t.Skipf("needs the Debian CNI plugins in %s (apt-get install -y containernetworking-plugins; CI installs them): %v", pluginDir, err)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs iproute2's ip for ip netns add: %v", err)
	}
}

// newNetns makes a named netns with `ip netns add` and deletes it at cleanup; it returns its path.
func newNetns(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
	require.NoError(t, err, "ip netns add %s: %s", name, out)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return "/var/run/netns/" + name
}

// inNetns runs f on an OS thread inside the netns at path, so the bridge plugin and everything f
// execs land in that "node" netns and not on this machine. The thread is discarded afterwards.
func inNetns(t *testing.T, path string, f func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		ns, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = ns.Close() }()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		f()
		errc <- nil
	}()
	require.NoError(t, <-errc, "enter netns %s", path)
}

func links(t *testing.T, nsPath string) map[string]netlink.Link {
	t.Helper()
	ns, err := netns.GetFromPath(nsPath)
	require.NoError(t, err)
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	require.NoError(t, err)
	defer h.Close()
	ls, err := h.LinkList()
	require.NoError(t, err)
	out := map[string]netlink.Link{}
	for _, l := range ls {
		out[l.Attrs().Name] = l
	}
	return out
}

func globalAddrs(t *testing.T, nsPath, ifname string) []netip.Prefix {
	t.Helper()
	ns, err := netns.GetFromPath(nsPath)
	require.NoError(t, err)
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	require.NoError(t, err)
	defer h.Close()
	l, err := h.LinkByName(ifname)
	require.NoError(t, err)
	as, err := h.AddrList(l, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var out []netip.Prefix
	for _, a := range as {
		if a.IP.IsGlobalUnicast() {
			ip, _ := netip.AddrFromSlice(a.IP)
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out
}

// leaseFiles lists host-local's lease files (named by the address) under dir.
func leaseFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, perr := netip.ParseAddr(d.Name()); perr == nil && !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	return out
}

type fixture struct {
	plugin  *Plugin
	cluster *memCluster
	hostNS  string
	podNS   string
	conf    *Config
}

const (
	sriovNetwork = "sriov1" // the VMI network names
	dummyNetwork = "other"
	sriovMAC     = "02:5e:00:00:00:07"
)

func newFixture(t *testing.T, sriovIPAM string) *fixture {
	t.Helper()
	requireNetns(t)
	f := &fixture{cluster: newMemCluster(), hostNS: newNetns(t, "ccni-node-"), podNS: newNetns(t, "ccni-pod-")}
	conf, err := parseConfig([]byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"pods","type":"cluster-cni",
		"kubeconfig":"/nonexistent/kubeconfig","pluginDir":%q,"dataDir":%q,
		"podNetwork":{"bridge":"ccni0","subnetV4":"10.244.7.0/24","subnetV6":"fd00:10:244:7::/64","serviceSubnets":["10.96.0.0/16"]}}`,
		pluginDir, t.TempDir())))
	require.NoError(t, err)
	f.conf = conf
	networks, err := json.Marshal([]nadv1.NetworkSelectionElement{
		{Name: "l2net", Namespace: "ns2", InterfaceRequest: hashedPodIfaceName(sriovNetwork), MacRequest: sriovMAC},
		{Name: "dummy", InterfaceRequest: hashedPodIfaceName(dummyNetwork)},
	})
	require.NoError(t, err)
	f.cluster.addPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "virt-launcher-vm1-x",
		Annotations: map[string]string{NetworksAnnotation: string(networks)}}})
	f.cluster.addNAD("ns2", "l2net", `{"cniVersion":"1.0.0","name":"l2net","type":"sriov","deviceID":"0000:65:00.2","mtu":1400,"ipam":`+sriovIPAM+`}`)
	f.cluster.addNAD("ns1", "dummy", `{"cniVersion":"1.0.0","name":"dummy","type":"none"}`)
	f.plugin = &Plugin{Conf: conf, Cluster: f.cluster, Env: Env{
		ContainerID: "ccnitest0", Netns: f.podNS, IfName: "eth0",
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=virt-launcher-vm1-x;K8S_POD_INFRA_CONTAINER_ID=ccnitest0",
	}}
	return f
}

func (f *fixture) do(t *testing.T, command string, prev []byte) ([]byte, error) {
	t.Helper()
	var out []byte
	var err error
	p := *f.plugin
	p.Env.Command = command
	if prev != nil {
		c := *p.Conf
		c.PrevResult = prev
		p.Conf = &c
	}
	inNetns(t, f.hostNS, func() {
		ctx := context.Background()
		switch command {
		case "ADD":
			out, err = p.Add(ctx)
		case "DEL":
			err = p.Del(ctx)
		case "CHECK":
			err = p.Check(ctx)
		}
	})
	return out, err
}

const dualStackIPAM = `{"type":"host-local","ranges":[[{"subnet":"192.168.77.0/24"}],[{"subnet":"fd77::/64"}]]}`

func TestAddCheckDel_RealPluginsInRealNetns(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	podIface := hashedPodIfaceName(sriovNetwork)
	tap := tapName(podIface)

	out, err := f.do(t, "ADD", nil)
	require.NoError(t, err)

	// The result is bridge's: eth0 in the sandbox, one address per family.
	res, err := parseResult("bridge", out)
	require.NoError(t, err)
	require.Len(t, res.IPs, 2)

	// eth0 has both families from the pod subnets.
	addrs := globalAddrs(t, f.podNS, "eth0")
	require.Len(t, addrs, 2, "eth0 addresses %v", addrs)
	v4, v6 := netip.MustParsePrefix("10.244.7.0/24"), netip.MustParsePrefix("fd00:10:244:7::/64")
	assert.True(t, v4.Contains(addrs[0].Addr()) || v4.Contains(addrs[1].Addr()), "v4 in %v", addrs)
	assert.True(t, v6.Contains(addrs[0].Addr()) || v6.Contains(addrs[1].Addr()), "v6 in %v", addrs)

	// The TAP standing in for the VF: owned by qemu, with the selection's MAC; the none network has no device.
	ls := links(t, f.podNS)
	require.Contains(t, ls, tap)
	tt, ok := ls[tap].(*netlink.Tuntap)
	require.True(t, ok, "%s is a %s", tap, ls[tap].Type())
	assert.Equal(t, uint32(qemuID), tt.Owner)
	assert.Equal(t, uint32(qemuID), tt.Group)
	assert.Equal(t, netlink.TUNTAP_MODE_TAP, tt.Mode)
	assert.Equal(t, sriovMAC, tt.Attrs().HardwareAddr.String())
	assert.Equal(t, 1400, tt.Attrs().MTU, "the NAD's mtu, as the SR-IOV operator sets it on a VF")
	assert.Len(t, ls, 3, "lo, eth0 and the TAP: %v", ls)

	// The annotations were patched once and parse with the sidecar's parsers.
	pod, err := f.cluster.Pod(context.Background(), "ns1", "virt-launcher-vm1-x")
	require.NoError(t, err)
	assert.Equal(t, 1, f.cluster.patches)
	snap := downwardapi.SnapshotFromMaps(pod.Labels, pod.Annotations)
	require.Empty(t, snap.Problems)
	require.Len(t, snap.NetworkStatus, 2, "the cluster network and the UDN; the none network is left out")
	def, udn := snap.NetworkStatus[0], snap.NetworkStatus[1]
	assert.True(t, def.Default)
	assert.Equal(t, "eth0", def.Interface)
	assert.ElementsMatch(t, []string{addrs[0].Addr().String(), addrs[1].Addr().String()}, def.IPs)
	assert.Equal(t, ls["eth0"].Attrs().HardwareAddr.String(), def.Mac)
	assert.Equal(t, "ns2/l2net", udn.Name)
	assert.Equal(t, podIface, udn.Interface)
	assert.Equal(t, sriovMAC, udn.Mac)
	assert.Equal(t, 1400, udn.Mtu, "network-status reports the VF's mtu, as Multus copies SR-IOV CNI's result")
	require.Len(t, udn.IPs, 2)
	assert.True(t, netip.MustParsePrefix("192.168.77.0/24").Contains(netip.MustParseAddr(udn.IPs[0])), udn.IPs[0])
	assert.True(t, netip.MustParsePrefix("fd77::/64").Contains(netip.MustParseAddr(udn.IPs[1])), udn.IPs[1])
	require.NotNil(t, udn.DeviceInfo)
	assert.Equal(t, "0000:65:00.2", udn.DeviceInfo.Pci.PciAddress)
	require.Contains(t, snap.PodNetworks, "default")
	require.Contains(t, snap.PodNetworks, "ns2/l2net")
	assert.NotContains(t, snap.PodNetworks, "ns1/dummy")
	assert.Equal(t, sriovMAC, snap.PodNetworks["ns2/l2net"].MAC.String())
	assert.Len(t, snap.PodNetworks["default"].IPAddresses, 2)

	// host-local holds one lease per address.
	assert.Len(t, leaseFiles(t, hostLocalDir(f.conf)), 4)

	// CHECK with the runtime's prevResult passes.
	_, err = f.do(t, "CHECK", out)
	require.NoError(t, err)

	// DEL removes everything: devices, leases, state; a second DEL is still success.
	_, err = f.do(t, "DEL", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, keys(links(t, f.podNS)))
	assert.Empty(t, leaseFiles(t, hostLocalDir(f.conf)))
	_, err = os.Stat(statePath(f.conf, "ccnitest0", "eth0"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = f.do(t, "DEL", nil)
	require.NoError(t, err)

	// CHECK after DEL fails naming the container.
	_, err = f.do(t, "CHECK", out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "container ccnitest0 interface eth0: no ADD recorded")
	assert.Equal(t, uint(codeUnknownContainer), errorCode(err))
}

// A DEL whose netns is already gone (the runtime passes none) still releases every address.
func TestDel_NetnsGone_ReleasesAddresses(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	_, err := f.do(t, "ADD", nil)
	require.NoError(t, err)
	require.NotEmpty(t, leaseFiles(t, hostLocalDir(f.conf)))
	f.plugin.Env.Netns = ""
	_, err = f.do(t, "DEL", nil)
	require.NoError(t, err)
	assert.Empty(t, leaseFiles(t, hostLocalDir(f.conf)))
}

// An ADD that fails half-way (host-local refuses the NAD's range) rolls back: no device, no lease, no
// state, no patch; the error names the network and the plugin.
func TestAdd_DelegateFails_RollsBackEverything(t *testing.T) {
	f := newFixture(t, `{"type":"host-local","ranges":[[{"subnet":"192.168.77.0/24","rangeStart":"192.168.78.1"}]]}`)
	_, err := f.do(t, "ADD", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "network ns2/l2net: host-local ADD for "+hashedPodIfaceName(sriovNetwork))
	assert.Equal(t, uint(codeDelegate), errorCode(err))
	assert.Equal(t, []string{"lo"}, keys(links(t, f.podNS)))
	assert.Empty(t, leaseFiles(t, hostLocalDir(f.conf)))
	_, serr := os.Stat(statePath(f.conf, "ccnitest0", "eth0"))
	assert.ErrorIs(t, serr, fs.ErrNotExist)
	assert.Equal(t, 0, f.cluster.patches)
}

// An ADD that fails at the very end (the apiserver refuses the patch) releases everything it had set up:
// eth0, the TAP and all four leases.
func TestAdd_PatchFails_RollsBackEverything(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	f.cluster.patchErr = withCode(codeAPIServer, errors.New("patch annotations of pod ns1/virt-launcher-vm1-x: the server is shutting down"))
	_, err := f.do(t, "ADD", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the server is shutting down")
	assert.NotContains(t, err.Error(), "rollback")
	assert.Equal(t, uint(codeAPIServer), errorCode(err))
	assert.Equal(t, []string{"lo"}, keys(links(t, f.podNS)))
	assert.Empty(t, leaseFiles(t, hostLocalDir(f.conf)))
	_, serr := os.Stat(statePath(f.conf, "ccnitest0", "eth0"))
	assert.ErrorIs(t, serr, fs.ErrNotExist)
}

// A missing NAD fails before anything is set up.
func TestAdd_MissingNAD_NothingSetUp(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	delete(f.cluster.nads, "ns1/dummy")
	_, err := f.do(t, "ADD", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "network 1 (ns1/dummy): get NetworkAttachmentDefinition ns1/dummy: not found")
	assert.Equal(t, uint(codeAPIServer), errorCode(err))
	assert.Equal(t, []string{"lo"}, keys(links(t, f.podNS)))
	assert.Empty(t, leaseFiles(t, hostLocalDir(f.conf)))
}

func keys(m map[string]netlink.Link) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The whole invocation as a runtime makes it (config on stdin, CNI_* environment, result on stdout) with
// the in-memory apiserver: ADD prints bridge's 1.0.0 result and exits 0, CHECK and DEL print nothing.
func TestRun_AddCheckDel_ThroughMain(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	stdin, err := json.Marshal(f.conf)
	require.NoError(t, err)
	env := map[string]string{"CNI_CONTAINERID": f.plugin.Env.ContainerID, "CNI_NETNS": f.podNS, "CNI_IFNAME": "eth0",
		"CNI_ARGS": f.plugin.Env.Args, "CNI_PATH": "/nonexistent"}
	invoke := func(command string, stdin []byte) (int, string) {
		env["CNI_COMMAND"] = command
		var out bytes.Buffer
		var status int
		inNetns(t, f.hostNS, func() {
			status = run(bytes.NewReader(stdin), &out, envMap(env), func(*Config) (Cluster, error) { return f.cluster, nil })
		})
		return status, out.String()
	}
	status, out := invoke("ADD", stdin)
	require.Equal(t, 0, status, out)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, cniVersion, res.CNIVersion)
	assert.Len(t, res.IPs, 2)

	var conf map[string]any
	require.NoError(t, json.Unmarshal(stdin, &conf))
	conf["prevResult"] = json.RawMessage(out)
	checkIn, err := json.Marshal(conf)
	require.NoError(t, err)
	status, got := invoke("CHECK", checkIn)
	assert.Equal(t, 0, status, got)
	assert.Empty(t, got)

	status, got = invoke("DEL", stdin)
	assert.Equal(t, 0, status, got)
	assert.Empty(t, got)
	assert.Equal(t, []string{"lo"}, keys(links(t, f.podNS)))
	assert.Empty(t, leaseFiles(t, hostLocalDir(f.conf)))
}
