package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// vfioVFAddress is where VF 0 of the node's igb PF sits: the PF behind the node's first pcie-root-port
// (bus 1), qemu's igb VF offset 0x80 and stride 2 (hw/net/igb.c IGB_VF_OFFSET, IGB_VF_STRIDE), so
// 01:10.0. The pod's device-info carries it, so the sidecar's <hostdev> names it; the node checks it.
const vfioVFAddress = "0000:01:10.0"

// vfioTimeout bounds one node run: node boot, VF and vfio steps, libvirt, the nested guest's boot and pings
// (TCG inside TCG).
const vfioTimeout = 40 * time.Minute

// TestGuestVFIO_NestedGuestOnVFIOBoundVF_HostdevFromSidecar_ReportsIgbvfAndMACAndPingsPeer is VFIO end
// to end: in a node guest (qemu 10, TCG, q35 with a virtual Intel IOMMU, an igb PF with SR-IOV whose wire is
// a tap in the test's namespace holding the peer), the node creates a VF, sets its MAC through the PF from
// network-status and binds it to vfio-pci (managed='no'); libvirt 11.3 in the node starts a domain whose
// <hostdev> is the one the sidecar's OnDefineDomain wrote through KubeVirt's hook Manager; the nested guest
// (the node's kernel, a busybox initramfs) reports the VF's driver and MAC and pings the peer from the
// addresses of the sidecar's network config. make test-guest runs it (on GUEST_VF_KUBEVIRT_VERSIONS), make
// test-vfio alone.
func TestGuestVFIO_NestedGuestOnVFIOBoundVF_HostdevFromSidecar_ReportsIgbvfAndMACAndPingsPeer(t *testing.T) {
	env, root := setupVFGuestTools(t)
	if missing := missingCommands("debugfs", "mkfs.ext4"); len(missing) > 0 {
		t.Skipf("skipping the VFIO guest: %s not installed (Debian: apt-get install e2fsprogs)", strings.Join(missing, ", "))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*imageBuildTimeout)
	defer cancel()
	began := time.Now()
	nodeRoot, built, err := debroot.Ensure(ctx, trixietools.DefaultCacheDir(), VFIONodeSpec(), t.Logf)
	require.NoError(t, err, "the node root (trixie: kernel, qemu 10, libvirt 11.3, busybox)")
	if built {
		env.record("node root build", time.Since(began))
	}
	began = time.Now()
	img, built, err := EnsureVFIONodeImage(ctx, guestCacheDir(), nodeRoot, t.Logf)
	require.NoError(t, err, "the node image")
	if built {
		env.record("node image build", time.Since(began))
	}

	att := vfSecondaryL2
	att.PCI = vfioVFAddress
	userData, err := cloudConfigUserData("runcmd")
	require.NoError(t, err)
	vmi := newVMI("guest-vfio", []vmiIface{secondary}, cloudInitVolume{UserData: userData})
	ann, err := podAnnotations(vmi, "infrastructure-locked", []attachment{att})
	require.NoError(t, err)
	work := t.TempDir()
	var (
		data     *cloudinit.CloudInitData
		returned []byte
	)
	// A subtest, as every scenario's: the hook-root lock and the sidecar end with it.
	require.True(t, t.Run("HooksThroughHookManager", func(t *testing.T) {
		data, _, returned = env.preStartDomain(t, start{vmi: vmi, labels: podLabels(vmi), annotations: ann}, work)
	}))
	hostdevs, err := hostdevElements(returned)
	require.NoError(t, err)
	require.Lenf(t, hostdevs, 1, "the domain OnDefineDomain returned has one <hostdev>:\n%s", returned)
	require.Containsf(t, hostdevs[0], "ua-sriov-"+secondary.Name, "the sidecar's hostdev alias")
	t.Logf("the sidecar's <hostdev>: %s", hostdevs[0])

	vfMAC := vfMACsFromNetworkStatus(t, ann)[secondaryNAD]
	require.NotNil(t, vfMAC, "network-status has the VF's MAC")
	addrs, err := staticAddrsForMAC(data.NetworkData, vfMAC.String())
	require.NoError(t, err)
	var peers []string
	for _, p := range vfPeers[secondaryNAD] {
		peers = append(peers, p.Addr().String())
	}
	cmdline := fmt.Sprintf("console=ttyS0 panic=-1 no_timer_check quiet sriovudn_addrs=%s sriovudn_peers=%s",
		strings.Join(addrs, ","), strings.Join(peers, ","))
	domainXML := nestedDomainXML(hostdevs, cmdline)

	peer, cleanup, err := newVFNetns(fmt.Sprintf("sriovudn-%d-vfio", os.Getpid()), []vfPF{{Tap: "pf0", Peers: vfPeers[secondaryNAD]}})
	require.NoError(t, err, "the peer's network namespace")
	t.Cleanup(cleanup)
	node := vfioNode{Root: root, Netns: peer.Name, Image: img, Work: filepath.Join(work, "node"), PFMAC: "52:54:00:a0:00:00", PFTap: "pf0",
		Accel: os.Getenv("GUEST_QEMU_ACCEL"), Memory: "1536"}
	require.NoError(t, os.MkdirAll(node.Work, 0o755))

	runCtx, runCancel := context.WithTimeout(context.Background(), vfioTimeout)
	defer runCancel()
	began = time.Now()
	lines, runErr := node.Run(runCtx, fmt.Sprintf("%s %s %s\n", node.PFMAC, vfMAC, vfioVFAddress), domainXML)
	env.record("node boot to the nested guest's report", time.Since(began))
	reports := []string{strings.Join(lines, "\n"), "domain.xml:\n" + domainXML}
	keepVFArtifacts(t, "vfio", data, node.ConsoleLog(), &reports)
	t.Logf("node and nested report:\n%s", strings.Join(lines, "\n"))

	layers := vfioLayers(lines)
	nested := nestedLines(lines)
	// Each layer is a subtest, in the order they run, so a failure names the first layer that broke.
	for _, layer := range []string{"iommu", "vf-creation", "vf-address", "mac", "vfio", "nested-initrd", "libvirt", "libvirt-define", "libvirt-start", "nested"} {
		if !t.Run(layer, func(t *testing.T) {
			assert.Truef(t, strings.HasPrefix(layers[layer], "ok"), "node layer %s: %q (run error: %v)", layer, layers[layer], runErr)
		}) {
			break
		}
	}
	t.Run("NestedVFDriverAndMAC", func(t *testing.T) {
		require.Lenf(t, nested["nic"], 1, "the nested guest's NIC report: %v", nested)
		assert.Contains(t, nested["nic"][0], "driver=igbvf", "the VF's driver in the nested guest")
		assert.Contains(t, nested["nic"][0], "mac="+vfMAC.String(), "the VF's MAC in the nested guest: the pod's, set through the PF")
	})
	t.Run("NestedAddresses", func(t *testing.T) {
		require.Lenf(t, nested["addrs"], 1, "the nested guest's address report: %v", nested)
		assert.ElementsMatch(t, addrs, strings.Fields(nested["addrs"][0]), "the addresses from the sidecar's network config")
	})
	t.Run("NestedPingsPeer", func(t *testing.T) {
		for _, p := range peers {
			assert.Containsf(t, nested["ping"], p+" ok", "the nested guest pings the peer %s over the VF", p)
		}
	})
}
