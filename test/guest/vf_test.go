package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// vfBootTimeout bounds one VF guest boot up to its first report (TCG, Debian's full kernel).
const vfBootTimeout = 10 * time.Minute

// The VF scenarios' networks: the layer-2 secondary and the primary UDN of the virtio scenarios, with DNS
// and an MTU in network-status, each on its own igb PF whose tap holds the peer (the primary's gateway).
var (
	vfSecondaryL2 = withStatus(secondaryL2, nadv1.DNS{Nameservers: []string{"10.200.0.53"}}, 1400)
	vfPrimaryL2   = withStatus(primaryL2, nadv1.DNS{Nameservers: []string{"10.100.0.10", "fd10:100::10"}}, 1300)
	vfPeers       = map[string][]netip.Prefix{
		secondaryNAD: {netip.MustParsePrefix("10.200.0.1/24"), netip.MustParsePrefix("fd10:200::1/64")},
		primaryNAD:   {netip.MustParsePrefix("10.100.0.1/16"), netip.MustParsePrefix("fd10:100::1/64")},
	}
)

func withStatus(a attachment, dns nadv1.DNS, mtu int) attachment {
	a.StatusDNS, a.StatusMTU = dns, mtu
	return a
}

// setupVFGuest is setupGuest for the VF scenarios: the VF image and the trixie tools root (qemu 10).
func setupVFGuest(t *testing.T) (*guestEnv, trixietools.Root) {
	t.Helper()
	env, root := setupVFGuestTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*imageBuildTimeout)
	defer cancel()
	start := time.Now()
	img, built, err := EnsureImage(ctx, guestCacheDir(), VFImageSpec(), t.Logf)
	require.NoError(t, err, "build the VF guest image")
	if built {
		env.record("VF image build", time.Since(start))
	}
	env.image = img
	return env, root
}

// guestCacheDir is $GUEST_CACHE_DIR, else /var/cache/sriov-udn-binding/guest.
func guestCacheDir() string {
	if d := os.Getenv("GUEST_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/sriov-udn-binding/guest"
}

// setupVFGuestTools is setupVFGuest without the VF image: the trixie tools root, the sidecar, the qemu user.
func setupVFGuestTools(t *testing.T) (*guestEnv, trixietools.Root) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping the VF guest in -short mode: it takes minutes (run `make test-guest`)")
	}
	if v, only := os.Getenv("KUBEVIRT_VERSION"), os.Getenv("GUEST_VF_KUBEVIRT_VERSIONS"); v != "" && only != "" && !slices.Contains(strings.Fields(only), v) {
		t.Skipf("skipping the VF guest on KubeVirt %s: it runs on %s only (GUEST_VF_KUBEVIRT_VERSIONS; the VF adds nothing version-specific, the virtio scenarios run on every version)", v, only)
	}
	if why := trixietools.Unavailable(); why != "" {
		t.Skip("skipping the VF guest: " + why)
	}
	if missing := missingCommands("xorrisofs", "useradd", "ip", "nsenter", "debootstrap", "mkfs.ext4"); len(missing) > 0 {
		t.Skipf("skipping the VF guest: %s not installed (Debian: apt-get install xorriso iproute2 util-linux debootstrap e2fsprogs)", strings.Join(missing, ", "))
	}
	env := &guestEnv{timings: map[string]time.Duration{}}
	t.Cleanup(func() { logTimings(t, env) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*imageBuildTimeout)
	defer cancel()

	start := time.Now()
	root, err := trixietools.Ensure(ctx, trixietools.DefaultCacheDir(), t.Logf)
	require.NoError(t, err, "the trixie tools root (qemu 10)")
	env.record("trixie tools root ready", time.Since(start))

	msg, err := ensureQemuUser()
	require.NoError(t, err)
	t.Log(msg)
	bin, err := harness.Build(t.TempDir())
	require.NoError(t, err)
	env.sidecar = bin
	env.secretsDir = t.TempDir()
	return env, root
}

// vfMACsFromNetworkStatus is what the SR-IOV CNI programs: for each network-status entry with a PCI
// device-info, the entry's MAC, keyed by network ("<ns>/<nad>").
func vfMACsFromNetworkStatus(t *testing.T, annotations map[string]string) map[string]net.HardwareAddr {
	t.Helper()
	var statuses []nadv1.NetworkStatus
	require.NoError(t, json.Unmarshal([]byte(annotations[nadv1.NetworkStatusAnnot]), &statuses))
	out := map[string]net.HardwareAddr{}
	for _, s := range statuses {
		if s.DeviceInfo == nil || s.DeviceInfo.Pci == nil {
			continue
		}
		mac, err := net.ParseMAC(s.Mac)
		require.NoErrorf(t, err, "network-status %s mac", s.Name)
		out[s.Name] = mac
	}
	return out
}

// vfArtifactsDir is $GUEST_ARTIFACTS_DIR, else bin/guest-artifacts of the repository: the VF scenarios
// always keep their consoles.
func vfArtifactsDir() string {
	if d := os.Getenv("GUEST_ARTIFACTS_DIR"); d != "" {
		return d
	}
	return filepath.Join(harness.RepoRoot(), "bin", "guest-artifacts")
}

// keepVFArtifacts copies a start's console, reports and cloud-init data to vfArtifactsDir()/<name>/.
func keepVFArtifacts(t *testing.T, name string, data *cloudinit.CloudInitData, consoleLog string, reports *[]string) {
	dir := filepath.Join(vfArtifactsDir(), name)
	console, _ := os.ReadFile(consoleLog)
	files := map[string][]byte{"console.log": console, "reports.txt": []byte(strings.Join(*reports, "\n"))}
	if data != nil {
		files["user-data"], files["network-data"] = []byte(data.UserData), []byte(data.NetworkData)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keep artifacts: %v", err)
		return
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), content, 0o644); err != nil {
			t.Logf("keep artifacts: %v", err)
		}
	}
	t.Logf("console and reports kept in %s", dir)
}

// vfReport is a report of the VF guest, with what the VF sections say.
type vfReport struct {
	*Report
	MTU           map[string]int // by link name
	VFSetup       string
	LSPCI         string
	GuestPings    map[string]string // peer address -> "ok" | "FAILED"
	CloudInitRuns int
}

func parseVFReport(t *testing.T, text string) *vfReport {
	t.Helper()
	r, err := ParseReport(text)
	require.NoError(t, err)
	out := &vfReport{Report: r, MTU: map[string]int{}, VFSetup: r.Sections["vfsetup"], LSPCI: r.Sections["lspci"], GuestPings: map[string]string{}}
	var links []struct {
		IfName string `json:"ifname"`
		MTU    int    `json:"mtu"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Sections["addr"]), &links))
	for _, l := range links {
		out.MTU[l.IfName] = l.MTU
	}
	for _, line := range strings.Split(r.Sections["guestping"], "\n") {
		if addr, res, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			out.GuestPings[addr] = res
		}
	}
	runs, err := strconv.Atoi(strings.TrimSpace(r.Sections["cloudinitruns"]))
	require.NoErrorf(t, err, "report section cloudinitruns")
	require.Positive(t, runs, "cloud-init started no stage in this boot")
	out.CloudInitRuns = runs
	return out
}

// vfNIC is what one VF must be in the guest.
type vfNIC struct {
	att      attachment
	name     string // the guest name the sidecar gives it (pkg/cloudinit guestName: the VMI name here)
	addrs    []string
	mtu      int
	dns      []string
	primary  bool
	peerAddr []netip.Prefix
}

func vfNICOf(a attachment) vfNIC {
	n := vfNIC{att: a, name: a.Iface.Name, addrs: a.Net.IPAddresses, mtu: a.StatusMTU, dns: a.StatusDNS.Nameservers,
		primary: a.Net.Role == "primary", peerAddr: vfPeers[a.Iface.NAD]}
	return n
}

// checkVFLayers asserts on a VF guest's report layer by layer, each a subtest named after the layer, so a
// failure says which one broke: VF creation, MAC, cloud-init, addresses (and routes, MTU, DNS), ping.
func checkVFLayers(t *testing.T, r *vfReport, peer *vfNetns, nics []vfNIC) {
	t.Run("VFCreation", func(t *testing.T) {
		assert.NotContains(t, r.VFSetup, "vf-creation FAILED", "sriov-vf-setup")
		assert.Equalf(t, len(nics), strings.Count(r.LSPCI, "Kernel driver in use: igbvf"), "VFs bound to igbvf in lspci -k:\n%s", r.LSPCI)
	})
	checkNICLayers(t, r, peer, nics)
}

// checkNICLayers is checkVFLayers after the VF's creation: MAC, cloud-init, addresses, ping (a subtest each).
func checkNICLayers(t *testing.T, r *vfReport, peer *vfNetns, nics []vfNIC) {
	t.Run("MAC", func(t *testing.T) {
		assert.NotContains(t, r.VFSetup, "mac FAILED", "sriov-vf-setup")
		for _, n := range nics {
			l, ok := r.LinkByMAC(n.att.Iface.MAC)
			if assert.Truef(t, ok, "no guest NIC has the pod's MAC %s (network-status of %s)", n.att.Iface.MAC, n.att.Iface.NAD) {
				assert.Equalf(t, n.name, l.Name, "guest name of the VF with MAC %s", n.att.Iface.MAC)
			}
		}
	})
	t.Run("CloudInit", func(t *testing.T) {
		checkCloudInitClean(t, r.Report, datasourceNoCld)
	})
	t.Run("Addresses", func(t *testing.T) {
		for _, n := range nics {
			checkAddresses(t, r.Report, n.att.Iface.MAC, n.addrs...)
			l, ok := r.LinkByMAC(n.att.Iface.MAC)
			if !ok {
				continue
			}
			assert.Equalf(t, n.mtu, r.MTU[l.Name], "MTU of guest NIC %s", l.Name)
			_, unit, ok := r.NetworkdUnitFor(n.att.Iface.MAC)
			if assert.Truef(t, ok, "no systemd-networkd unit for %s", l.Name) {
				assert.ElementsMatchf(t, n.dns, UnitValues(unit, "DNS"), "DNS of guest NIC %s (networkd unit)", l.Name)
			}
			if n.primary {
				checkPrimary(t, r.Report)
			} else {
				checkNoDefaultRoute(t, r.Report, n.att.Iface.MAC)
			}
		}
	})
	t.Run("Ping", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, n := range nics {
			for _, p := range n.peerAddr {
				assert.Equalf(t, "ok", r.GuestPings[p.Addr().String()], "the guest pings the peer %s", p.Addr())
			}
			for _, a := range n.addrs {
				assert.NoErrorf(t, peer.Ping(ctx, netip.MustParsePrefix(a).Addr()), "the peer pings the VF's %s", a)
			}
		}
	})
}

// vfStart is one start of a VF scenario: the pre-start path for st, the PFs with the VFs the CNI would
// program (index per network, MAC from network-status), qemu 10 in the peer's namespace.
type vfStart struct {
	st       start
	atts     []attachment
	vfIndex  map[string]int // VF index per network, 0 when absent
	disk     string         // kept root disk ("" = throwaway overlay)
	artifact string
}

// bootVF runs one start up to the guest's first report. The caller stops the guest.
func bootVF(t *testing.T, env *guestEnv, root trixietools.Root, peer *vfNetns, s vfStart) (*vfGuest, *vfReport, []vfNIC, *[]string) {
	t.Helper()
	work := t.TempDir()
	var data *cloudinit.CloudInitData
	require.True(t, t.Run("HooksThroughHookManager", func(t *testing.T) {
		data, _ = env.preStart(t, s.st, work)
	}))
	t.Logf("network data the sidecar returned (%s):\n%s", data.DataSource, data.NetworkData)
	iso, err := launcherGenerateISO(s.st.vmi, data)
	require.NoError(t, err)

	macs := vfMACsFromNetworkStatus(t, s.st.annotations)
	var (
		pfs  []vfPF
		nics []vfNIC
	)
	for i, a := range s.atts {
		mac, ok := macs[a.Iface.NAD]
		require.Truef(t, ok, "network-status has no VF entry for %s", a.Iface.NAD)
		pfs = append(pfs, vfPF{Tap: fmt.Sprintf("pf%d", i), MAC: net.HardwareAddr{0x52, 0x54, 0x00, 0xa0, byte(i), 0x00},
			Peers: vfPeers[a.Iface.NAD], VFs: []vfSlot{{Index: s.vfIndex[a.Iface.NAD], MAC: mac}}})
		nics = append(nics, vfNICOf(a))
	}
	vmWork := filepath.Join(work, "vm")
	require.NoError(t, os.MkdirAll(vmWork, 0o755))
	boot := VFBoot{Root: root, Netns: peer.Name, Image: env.image, ISO: iso, Work: vmWork, PFs: pfs, Accel: os.Getenv("GUEST_QEMU_ACCEL")}
	if s.disk != "" {
		boot.Work = filepath.Dir(s.disk)
		boot.Disk = s.disk
	}
	ctx, cancel := context.WithTimeout(context.Background(), vfBootTimeout)
	defer cancel()
	g, err := boot.Start(context.Background())
	require.NoError(t, err)
	reports := &[]string{}
	t.Cleanup(func() { keepVFArtifacts(t, s.artifact, data, boot.ConsoleLog(), reports) })
	text, took, err := g.NextReport(ctx)
	*reports = append(*reports, text)
	if err != nil {
		g.Stop(0)
		require.NoError(t, err, "boot the VF guest")
	}
	env.record("VF boot to report "+s.artifact, took)
	return g, parseVFReport(t, text), nics, reports
}

// TestGuestVF_TwoIgbVFsOnTwoNetworks_ConfiguredFromSidecar_PingedBothWays_BackAfterUnplug boots the VF
// guest (qemu 10, two igb PFs, a VF of each programmed through its PF with the MAC from network-status)
// on the ISO KubeVirt built from the sidecar's output; then unplugs both VFs (sriov_numvfs 0) and plugs
// them back with the same MACs, as a migration's unplug and plug look to the guest.
func TestGuestVF_TwoIgbVFsOnTwoNetworks_ConfiguredFromSidecar_PingedBothWays_BackAfterUnplug(t *testing.T) {
	env, root := setupVFGuest(t)
	userData, err := cloudConfigUserData("runcmd")
	require.NoError(t, err)
	vmi := newVMI("guest-vf-two", []vmiIface{secondary, primary}, cloudInitVolume{UserData: userData})
	atts := []attachment{vfSecondaryL2, vfPrimaryL2}
	ann, err := podAnnotations(vmi, "infrastructure-locked", atts)
	require.NoError(t, err)
	peer, cleanup, err := newVFNetns(fmt.Sprintf("sriovudn-%d-two", os.Getpid()), vfPFsFor(atts))
	require.NoError(t, err, "the peer's network namespace")
	t.Cleanup(cleanup)

	g, first, nics, reports := bootVF(t, env, root, peer, vfStart{
		st: start{vmi: vmi, labels: podLabels(vmi), annotations: ann}, atts: atts, artifact: "vf-two-networks"})
	defer g.Stop(time.Minute)
	t.Run("Boot", func(t *testing.T) { checkVFLayers(t, first, peer, nics) })

	ctx, cancel := context.WithTimeout(context.Background(), vfBootTimeout)
	defer cancel()
	before := g.Uptime()
	require.NoError(t, g.Send("replug"))
	text, took, err := g.NextReport(ctx)
	*reports = append(*reports, text)
	require.NoError(t, err, "the report after the VFs were unplugged and plugged back")
	env.record("VF unplug, plug and report again", took-before)
	again := parseVFReport(t, text)
	t.Run("AfterUnplugAndPlug", func(t *testing.T) {
		assert.Containsf(t, again.VFSetup, "sriov_numvfs=0 (unplugged)", "the VFs were unplugged")
		checkVFLayers(t, again, peer, nics)
		assert.Equal(t, first.CloudInitRuns, again.CloudInitRuns, "cloud-init stages started in this boot: none more after the VFs came back")
		assert.Equal(t, first.InstanceID, again.InstanceID)
	})
}

// vfPFsFor is the PFs (taps with the peers) of the networks of atts, for the namespace.
func vfPFsFor(atts []attachment) []vfPF {
	var pfs []vfPF
	for i, a := range atts {
		pfs = append(pfs, vfPF{Tap: fmt.Sprintf("pf%d", i), Peers: vfPeers[a.Iface.NAD]})
	}
	return pfs
}

// TestGuestVF_RestartOntoAnotherVFWithNewAddresses_GetsTheNewOnes is the restart scenario on real VFs: the
// VM starts twice on one disk; the second pod gets another VF of the PF (index 1, another host PCI
// address) with the same MAC (the VMI sets it) and new addresses; the guest must hold exactly the new
// ones, and cloud-init keep its instance.
func TestGuestVF_RestartOntoAnotherVFWithNewAddresses_GetsTheNewOnes(t *testing.T) {
	env, root := setupVFGuest(t)
	userData, err := cloudConfigUserData("runcmd")
	require.NoError(t, err)
	secondStart := vfSecondaryL2
	secondStart.PCI = "0000:65:00.3"
	secondStart.Net.IPAddresses = []string{"10.200.0.6/24", "fd10:200::6/64"}
	secondStart.StatusIPs = []string{"10.200.0.6", "fd10:200::6"}
	peer, cleanup, err := newVFNetns(fmt.Sprintf("sriovudn-%d-restart", os.Getpid()), vfPFsFor([]attachment{vfSecondaryL2}))
	require.NoError(t, err, "the peer's network namespace")
	t.Cleanup(cleanup)

	diskDir := t.TempDir()
	disk := filepath.Join(diskDir, "disk.img")
	require.NoError(t, copySparse(env.image.Root, disk), "the VM's own disk")
	var firstID string
	for i, s := range []struct {
		att     attachment
		vfIndex int
	}{{vfSecondaryL2, 0}, {secondStart, 1}} {
		name := fmt.Sprintf("start%d", i+1)
		if !t.Run(name, func(t *testing.T) {
			vmi := newVMI("guest-vf-restart", []vmiIface{secondary}, cloudInitVolume{UserData: userData})
			vmi.UID = types.UID(uuidFor("vmi/guest-vf-restart/" + name))
			ann, err := podAnnotations(vmi, "primary", []attachment{s.att})
			require.NoError(t, err)
			g, r, nics, _ := bootVF(t, env, root, peer, vfStart{
				st: start{vmi: vmi, labels: podLabels(vmi), annotations: ann}, atts: []attachment{s.att},
				vfIndex: map[string]int{secondaryNAD: s.vfIndex}, disk: disk, artifact: "vf-restart-" + name})
			checkVFLayers(t, r, peer, nics)
			if firstID != "" {
				assert.Equal(t, firstID, r.InstanceID, "cloud-init instance-id across starts")
			}
			firstID = r.InstanceID
			g.Stop(2 * time.Minute) // a clean shutdown, so that the next start finds what this one wrote
		}) {
			t.FailNow()
		}
	}
}
