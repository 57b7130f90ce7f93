package ifacecache_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kvv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/network/cache"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	kfs "kubevirt.io/kubevirt/pkg/os/fs"
	"kubevirt.io/kubevirt/pkg/util"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/statusmerge"
)

const (
	vmiUID = "0b3c8e5e-6f3a-4c8e-9a52-2f4b6c1d9e7f"
	vfMAC  = "02:00:00:00:00:01"
	ipv4   = "10.66.10.77"
	ipv6   = "fd00:10:66::77"
	lla    = "fe80::f4e1:74ff:fe94:b81a"
)

// kubevirtCacheRoot is where KubeVirt's NewPodInterfaceCache roots every VMI's cache
// (pkg/network/cache/podinterface.go: util.VirtPrivateDir + "network-info-cache").
var kubevirtCacheRoot = filepath.Join(util.VirtPrivateDir, "network-info-cache")

// rootedCacheCreator is the cache creator a virt-handler integration hands to KubeVirt's reader
// and NetStat to read our directory instead of its own: it maps KubeVirt's cache root onto dir,
// keeping the <vmi-uid>/<iface> layout below it.
type rootedCacheCreator struct{ dir string }

func (c rootedCacheCreator) New(path string) *cache.Cache {
	rel, err := filepath.Rel(kubevirtCacheRoot, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		// Not a pod interface cache path: keep it inside dir all the same.
		rel = filepath.Join("not-pod-iface-cache", filepath.Clean("/"+path))
	}
	return cache.NewCustomCache(filepath.Join(c.dir, rel), kfs.New())
}

func specIface() kvv1.Interface {
	return kvv1.Interface{Name: "net1", MacAddress: vfMAC, Binding: &kvv1.PluginBinding{Name: "sriov-udn"}}
}

func boundIface(addrs ...string) model.BoundInterface {
	b := model.BoundInterface{Name: "net1", Network: "udn"}
	for _, a := range addrs {
		b.Addresses = append(b.Addresses, netip.MustParsePrefix(a))
	}
	return b
}

var stacks = []struct {
	name    string
	addrs   []string
	primary model.Family
	want    []string
}{
	{"IPv4", []string{ipv4 + "/24"}, model.IPv4, []string{ipv4}},
	{"IPv6", []string{ipv6 + "/64"}, model.IPv6, []string{ipv6}},
	{"dual stack IPv4 primary", []string{ipv6 + "/64", ipv4 + "/24"}, model.IPv4, []string{ipv4, ipv6}},
	{"dual stack IPv6 primary", []string{ipv4 + "/24", ipv6 + "/64"}, model.IPv6, []string{ipv6, ipv4}},
}

func TestKubeVirtReader_ReadsWhatWriterWrites_ByteForByteAsKubeVirtWouldWrite(t *testing.T) {
	for _, tt := range stacks {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := specIface()
			_, err := ifacecache.NewWriter(dir, nil).Sync(vmiUID, kubevirtjson.Interfaces(t, spec), []model.BoundInterface{boundIface(tt.addrs...)}, tt.primary)
			require.NoError(t, err)

			got, err := cache.ReadPodInterfaceCache(rootedCacheCreator{dir}, vmiUID, "net1")
			require.NoError(t, err)
			want := &cache.PodIfaceCacheData{Iface: &spec, PodIP: tt.want[0], PodIPs: tt.want}
			assert.Equal(t, want, got)

			// KubeVirt's writeToCachedFile (pkg/network/cache/cache.go) marshals with
			// MarshalIndent(&obj, "", "  "): our file is what virt-handler would have written.
			var obj any = want
			kubevirtBytes, err := json.MarshalIndent(&obj, "", "  ")
			require.NoError(t, err)
			ourBytes, err := os.ReadFile(filepath.Join(dir, vmiUID, "net1"))
			require.NoError(t, err)
			assert.Equal(t, string(kubevirtBytes), string(ourBytes))
		})
	}
}

func TestKubeVirtReader_RemovedInterface_NotFound(t *testing.T) {
	dir := t.TempDir()
	w := ifacecache.NewWriter(dir, nil)
	_, err := w.Sync(vmiUID, nil, []model.BoundInterface{boundIface(ipv4 + "/24")}, model.IPv4)
	require.NoError(t, err)
	_, err = w.Sync(vmiUID, nil, nil, model.IPv4)
	require.NoError(t, err)
	_, err = cache.ReadPodInterfaceCache(rootedCacheCreator{dir}, vmiUID, "net1")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// vmiWithVF is a VMI with one interface bound to our plugin on a Multus network.
func vmiWithVF() *kvv1.VirtualMachineInstance {
	return &kvv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: types.UID(vmiUID)},
		Spec: kvv1.VirtualMachineInstanceSpec{
			Domain: kvv1.DomainSpec{Devices: kvv1.Devices{Interfaces: []kvv1.Interface{specIface()}}},
			Networks: []kvv1.Network{{Name: "net1", NetworkSource: kvv1.NetworkSource{
				Multus: &kvv1.MultusNetwork{NetworkName: "ns1/udn"},
			}}},
		},
	}
}

// domainWithVF is the domain as our OnDefineDomain shapes it: the VF as a hostdev whose alias is
// ua-sriov-<iface> (DESIGN.md section 3), parsed by KubeVirt's own schema.
func domainWithVF(t *testing.T, agent ...api.InterfaceStatus) *api.Domain {
	t.Helper()
	var spec api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(`<domain type="kvm"><name>ns1_vm1</name><devices>
  <hostdev mode="subsystem" type="pci" managed="no">
    <source><address type="pci" domain="0x0000" bus="0x65" slot="0x00" function="0x2"/></source>
    <alias name="ua-sriov-net1"/>
  </hostdev>
</devices></domain>`), &spec))
	return &api.Domain{Spec: spec, Status: api.DomainStatus{Interfaces: agent}}
}

func TestKubeVirtNetStat_ReportsWrittenAddressesForHostdevAlias(t *testing.T) {
	for _, tt := range stacks {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := ifacecache.NewWriter(dir, nil).Sync(vmiUID, kubevirtjson.Interfaces(t, specIface()), []model.BoundInterface{boundIface(tt.addrs...)}, tt.primary)
			require.NoError(t, err)

			vmi := vmiWithVF()
			require.NoError(t, netsetup.NewNetStateWithCustomFactory(rootedCacheCreator{dir}).UpdateStatus(vmi, domainWithVF(t)))

			require.Len(t, vmi.Status.Interfaces, 1)
			status := vmi.Status.Interfaces[0]
			assert.Equal(t, "net1", status.Name)
			assert.Equal(t, vfMAC, status.MAC)
			assert.Equal(t, tt.want[0], status.IP)
			assert.Equal(t, tt.want, status.IPs)
		})
	}
}

func TestKubeVirtNetStat_WithoutOurCache_HostdevHasNoIP(t *testing.T) {
	// The gap the issue is about: a VF has no pod interface, so nothing reports its address.
	vmi := vmiWithVF()
	require.NoError(t, netsetup.NewNetStateWithCustomFactory(rootedCacheCreator{t.TempDir()}).UpdateStatus(vmi, domainWithVF(t)))
	require.Len(t, vmi.Status.Interfaces, 1)
	assert.Empty(t, vmi.Status.Interfaces[0].IPs)
}

func TestKubeVirtNetStat_MemoizesFirstCacheRead_LaterWritesUnseenUntilTeardown(t *testing.T) {
	// Upstream behaviour the integration must know (pkg/network/setup/netstat.go
	// getPodInterfacefromFileCache): NetStat reads a cache file once per VMI and interface and keeps
	// the result, an empty one too when the file does not exist yet. A stock virt-handler thus
	// misses an entry written after its first status update, and any later IP change, until
	// NetStat.Teardown (VMI gone) or a restart. MergeInterfaceStatus takes the cache as input, so a
	// caller that reads the files on each update sees every change.
	dir := t.TempDir()
	netStat := netsetup.NewNetStateWithCustomFactory(rootedCacheCreator{dir})
	vmi := vmiWithVF()
	require.NoError(t, netStat.UpdateStatus(vmi, domainWithVF(t)))
	require.Empty(t, vmi.Status.Interfaces[0].IP)

	w := ifacecache.NewWriter(dir, nil)
	_, err := w.Sync(vmiUID, nil, []model.BoundInterface{boundIface(ipv4 + "/24")}, model.IPv4)
	require.NoError(t, err)
	require.NoError(t, netStat.UpdateStatus(vmi, domainWithVF(t)))
	assert.Empty(t, vmi.Status.Interfaces[0].IP, "written after the first read: unseen")

	netStat.Teardown(vmi)
	require.NoError(t, netStat.UpdateStatus(vmi, domainWithVF(t)))
	assert.Equal(t, ipv4, vmi.Status.Interfaces[0].IP, "seen after Teardown")

	_, err = w.Sync(vmiUID, nil, []model.BoundInterface{boundIface("10.66.10.99/24")}, model.IPv4)
	require.NoError(t, err)
	require.NoError(t, netStat.UpdateStatus(vmi, domainWithVF(t)))
	assert.Equal(t, ipv4, vmi.Status.Interfaces[0].IP, "IP change unseen")
}

// statusRun feeds a sequence of guest-agent reports both to KubeVirt's NetStat and to our merge,
// and returns the primary IP each reported after each report.
type statusRun struct {
	upstream, ours []string
}

func runReports(t *testing.T, cacheDir string, reports [][]api.InterfaceStatus) statusRun {
	t.Helper()
	creator := rootedCacheCreator{cacheDir}
	netStat := netsetup.NewNetStateWithCustomFactory(creator)
	vmi := vmiWithVF()

	// Our merge gets the same cache, read by KubeVirt's reader as virt-handler would.
	podCache := map[string]ifacecache.PodIfaceCacheData{}
	if c, err := cache.ReadPodInterfaceCache(creator, vmiUID, "net1"); err == nil {
		podCache["net1"] = ifacecache.PodIfaceCacheData{Iface: mustJSON(t, c.Iface), PodIP: c.PodIP, PodIPs: c.PodIPs, State: int(c.State)}
	}
	var previous []kvv1.VirtualMachineInstanceNetworkInterface

	var run statusRun
	for _, report := range reports {
		require.NoError(t, netStat.UpdateStatus(vmi, domainWithVF(t, report...)))
		require.NotEmpty(t, vmi.Status.Interfaces)
		require.Equal(t, "net1", vmi.Status.Interfaces[0].Name)
		run.upstream = append(run.upstream, vmi.Status.Interfaces[0].IP)

		agent := make([]kvv1.VirtualMachineInstanceNetworkInterface, 0, len(report))
		for _, r := range report {
			agent = append(agent, kvv1.VirtualMachineInstanceNetworkInterface{MAC: r.Mac, IP: r.Ip, IPs: r.IPs, InterfaceName: r.InterfaceName})
		}
		previous = statusmerge.MergeInterfaceStatus(statusmerge.StatusInputs{
			// What KubeVirt's sriovIfacesStatusFromDomainHostDevices derives from the alias.
			Domain:     []kvv1.VirtualMachineInstanceNetworkInterface{{Name: "net1", MAC: vfMAC, InfoSource: "domain"}},
			Spec:       vmi.Spec.Domain.Devices.Interfaces,
			PodCache:   podCache,
			GuestAgent: agent,
			Previous:   previous,
			Primary:    model.IPv4,
		})
		require.Equal(t, "net1", previous[0].Name)
		run.ours = append(run.ours, previous[0].IP)
	}
	return run
}

func report(ips ...string) []api.InterfaceStatus {
	s := api.InterfaceStatus{Mac: vfMAC, InterfaceName: "eth1", IPs: ips}
	if len(ips) > 0 {
		s.Ip = ips[0]
	}
	return []api.InterfaceStatus{s}
}

func TestDifferential_FlappingGuestAgentReport_UpstreamFlapsOurMergeHoldsTheIP(t *testing.T) {
	// The sequence: full report, link-local only, none, full again.
	reports := [][]api.InterfaceStatus{report(ipv4, lla), report(lla), report(), report(ipv4, lla)}
	tests := []struct {
		name         string
		addrs        []string // written to the cache; none: the VF has only guest-agent data
		wantUpstream []string
	}{
		{"with our cache entry", []string{ipv4 + "/24"}, []string{ipv4, lla, "", ipv4}},
		{"dual-stack cache entry", []string{ipv4 + "/24", ipv6 + "/64"}, []string{ipv4, ipv6, "", ipv4}},
		{"without cache (guest agent only)", nil, []string{ipv4, lla, "", ipv4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.addrs != nil {
				_, err := ifacecache.NewWriter(dir, nil).Sync(vmiUID, kubevirtjson.Interfaces(t, specIface()), []model.BoundInterface{boundIface(tt.addrs...)}, model.IPv4)
				require.NoError(t, err)
			}
			run := runReports(t, dir, reports)
			assert.Equal(t, tt.wantUpstream, run.upstream, "KubeVirt v1.8 NetStat flaps")
			assert.Equal(t, []string{ipv4, ipv4, ipv4, ipv4}, run.ours, "our merge holds the primary IP")
		})
	}
}

func TestDifferential_PropertyRandomGuestAgentReports_OurPrimaryIPNeverChanges(t *testing.T) {
	const seed, sequences, steps = 1129, 300, 8
	r := rand.New(rand.NewPCG(seed, seed))
	pool := []string{ipv4, "10.66.10.78", ipv6, "2001:db8::5", lla, "fe80::1", "169.254.7.7"}
	// One cache directory per stack, shared by all sequences: each sequence gets a fresh NetStat.
	var cacheDirs []string
	for _, addrs := range [][]string{{ipv4 + "/24"}, {ipv4 + "/24", ipv6 + "/64"}} {
		dir := t.TempDir()
		_, err := ifacecache.NewWriter(dir, nil).Sync(vmiUID, kubevirtjson.Interfaces(t, specIface()), []model.BoundInterface{boundIface(addrs...)}, model.IPv4)
		require.NoError(t, err)
		cacheDirs = append(cacheDirs, dir)
	}
	upstreamFlaps := 0
	for seq := range sequences {
		reports := make([][]api.InterfaceStatus, steps)
		for i := range reports {
			if r.IntN(5) == 0 {
				continue // agent did not report the interface at all
			}
			var ips []string
			for range r.IntN(4) {
				ips = append(ips, pool[r.IntN(len(pool))])
			}
			reports[i] = report(ips...)
		}
		run := runReports(t, cacheDirs[seq%len(cacheDirs)], reports)
		for i, ip := range run.ours {
			if ip != ipv4 {
				t.Fatalf("seed %d sequence %d: our primary IP at report %d is %q, want %q\nreports %v\nours %v",
					seed, seq, i, ip, ipv4, fmt.Sprint(reports), run.ours)
			}
		}
		for _, ip := range run.upstream {
			if ip != run.upstream[0] {
				upstreamFlaps++
				break
			}
		}
	}
	t.Logf("seed %d: KubeVirt v1.8 NetStat changed the primary IP in %d of %d sequences; ours in 0", seed, upstreamFlaps, sequences)
	assert.Positive(t, upstreamFlaps, "the random reports must exercise the upstream flap")
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}
