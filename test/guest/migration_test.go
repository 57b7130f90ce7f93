package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
)

// The migration's VF: a hot-pluggable virtio NIC on its own pcie-root-port, as a VF is a PCIe function that
// KubeVirt hot-unplugs on the source and hot-plugs on the target (pkg/virt-handler SR-IOV hotplug path, patch
// 0003). Its backend is the tap migrationTap in the peer's namespace, which holds the peer's addresses.
const (
	migrationPort   = "vfport"
	migrationNIC    = "vfnic"
	migrationTap    = "vf0"
	migrationSocket = vfWorkDir + "/migrate.sock"
)

// otherMAC is the MAC of the NIC the target plugs in the last step: not the VMI's, so no config matches it.
var otherMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x0a, 0x99, 0x05}

// migrationStepTimeout bounds each QMP step: an unplug (the guest's eject through ACPI, q35's default in qemu 10), the
// migration of 1 GiB of guest memory over a unix socket, a plug and the report after it.
const migrationStepTimeout = 5 * time.Minute

// hotplugNICArgs is qemu's netdev_add and device_add arguments of the VF NIC with mac on migrationPort.
func hotplugNICArgs(netdev, id string, mac net.HardwareAddr) (map[string]any, map[string]any) {
	return map[string]any{"type": "tap", "id": netdev, "ifname": migrationTap, "script": "no", "downscript": "no"},
		map[string]any{"driver": "virtio-net-pci", "id": id, "netdev": netdev, "bus": migrationPort, "mac": mac.String(), "romfile": ""}
}

// migrationQemuArgs is what the source and the target add to VFBoot's command line: the monitor and the
// root port the VF sits on; the source also starts with the VF, the target with -incoming defer (the URI
// comes over QMP, once the target listens).
func migrationQemuArgs(mon *qmpListener, vfMAC net.HardwareAddr, target bool) []string {
	args := append(mon.QemuArgs(vfWorkDir), "-device", "pcie-root-port,id="+migrationPort+",chassis=1")
	if target {
		return append(args, "-incoming", "defer")
	}
	netdev, dev := hotplugNICArgs("vf-src", migrationNIC, vfMAC)
	return append(args,
		"-netdev", fmt.Sprintf("tap,id=%s,ifname=%s,script=no,downscript=no", netdev["id"], migrationTap),
		"-device", fmt.Sprintf("virtio-net-pci,id=%s,netdev=%s,bus=%s,mac=%s,romfile=", dev["id"], dev["netdev"], migrationPort, vfMAC))
}

// startMigrationQemu starts one side and opens its monitor; the caller stops the guest.
func startMigrationQemu(ctx context.Context, b VFBoot, vfMAC net.HardwareAddr, side string) (*vfGuest, *qmpConn, error) {
	mon, err := listenQMP(b.Work, "qmp-"+side)
	if err != nil {
		return nil, nil, err
	}
	g, err := b.Start(ctx, migrationQemuArgs(mon, vfMAC, side == "target")...)
	if err != nil {
		return nil, nil, fmt.Errorf("start the %s qemu: %w", side, err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	q, err := mon.Accept(actx)
	if err != nil {
		g.Stop(0)
		return nil, nil, fmt.Errorf("the %s qemu's monitor: %w", side, err)
	}
	return g, q, nil
}

// unplugNIC is a PCIe hot-unplug: device_del, then the guest's release (DEVICE_DELETED), then the backend.
func unplugNIC(ctx context.Context, q *qmpConn, id, netdev string) error {
	if _, err := q.Execute(ctx, "device_del", map[string]any{"id": id}); err != nil {
		return err
	}
	if _, err := q.WaitEvent(ctx, "DEVICE_DELETED", func(d json.RawMessage) bool {
		var ev struct {
			Device string `json:"device"`
		}
		return json.Unmarshal(d, &ev) == nil && ev.Device == id
	}, nil); err != nil {
		return fmt.Errorf("the guest did not release %s: %w", id, err)
	}
	if netdev == "" {
		return nil
	}
	_, err := q.Execute(ctx, "netdev_del", map[string]any{"id": netdev})
	return err
}

// plugNIC hot-plugs the VF NIC with mac on the tap.
func plugNIC(ctx context.Context, q *qmpConn, netdev, id string, mac net.HardwareAddr) error {
	nd, dev := hotplugNICArgs(netdev, id, mac)
	if _, err := q.Execute(ctx, "netdev_add", nd); err != nil {
		return err
	}
	_, err := q.Execute(ctx, "device_add", dev)
	return err
}

// migrate runs the migration source -> target over migrationSocket and waits until the target runs.
func migrate(ctx context.Context, src, tgt *qmpConn) error {
	if _, err := tgt.Execute(ctx, "migrate-incoming", map[string]any{"uri": "unix:" + migrationSocket}); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if _, err := src.Execute(ctx, "migrate-set-capabilities", map[string]any{
		"capabilities": []map[string]any{{"capability": "events", "state": true}}}); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	// qemu's default bandwidth cap (128 MiB/s) is for a shared network; here it is a local socket.
	if _, err := src.Execute(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": int64(4) << 30}); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if _, err := src.Execute(ctx, "migrate", map[string]any{"uri": "unix:" + migrationSocket}); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	status := func(want ...string) func(json.RawMessage) bool {
		return func(d json.RawMessage) bool {
			var ev struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(d, &ev) != nil {
				return false
			}
			for _, w := range want {
				if ev.Status == w {
					return true
				}
			}
			return false
		}
	}
	if _, err := src.WaitEvent(ctx, "MIGRATION", status("completed"), status("failed", "cancelled")); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if _, err := tgt.WaitEvent(ctx, "RESUME", nil, nil); err != nil {
		return fmt.Errorf("target: the guest did not resume: %w", err)
	}
	return nil
}

// stopSource ends the source qemu (paused after the migration, as KubeVirt deletes the source pod) and
// waits for it, so that the tap is free for the target.
func stopSource(ctx context.Context, g *vfGuest) error {
	g.Stop(0)
	select {
	case err := <-g.done:
		g.done <- err
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the source qemu did not exit: %w", ctx.Err())
	}
}

// TestGuestVF_MigrationUnplugMigratePlug_SameMACKeepsAddressesWithoutCloudInit_OtherMACStaysUnconfigured is a
// KubeVirt SR-IOV live migration as the guest sees it: two qemu processes on one disk; the source boots on
// the ISO KubeVirt built from the sidecar's output with the VF (a virtio NIC with the VF's MAC on a PCIe
// root port, its tap in the peer's namespace); over QMP the source hot-unplugs it, migrates to the target
// (-incoming), and the target hot-plugs a NIC with the same MAC. The guest must hold the VF's addresses
// again, with no new boot and no cloud-init stage, and the peer reach it. Then a NIC with another MAC is
// plugged instead: no config matches it, which is why admission requires a macAddress with the opt-in.
func TestGuestVF_MigrationUnplugMigratePlug_SameMACKeepsAddressesWithoutCloudInit_OtherMACStaysUnconfigured(t *testing.T) {
	env, root := setupVFGuest(t)
	userData, err := cloudConfigUserData("runcmd")
	require.NoError(t, err)
	vmi := newVMI("guest-vf-migrate", []vmiIface{secondary}, cloudInitVolume{UserData: userData})
	att := vfSecondaryL2
	ann, err := podAnnotations(vmi, "primary", []attachment{att})
	require.NoError(t, err)
	peer, cleanup, err := newVFNetns(fmt.Sprintf("sriovudn-%d-migrate", os.Getpid()), []vfPF{{Tap: migrationTap, Peers: vfPeers[secondaryNAD]}})
	require.NoError(t, err, "the peer's network namespace")
	t.Cleanup(cleanup)

	var data *cloudinit.CloudInitData
	require.True(t, t.Run("HooksThroughHookManager", func(t *testing.T) {
		st := start{vmi: vmi, labels: podLabels(vmi), annotations: ann}
		data, _ = env.preStart(t, st, t.TempDir())
	}))
	t.Logf("network data the sidecar returned (%s):\n%s", data.DataSource, data.NetworkData)
	iso, err := launcherGenerateISO(vmi, data)
	require.NoError(t, err)
	vfMAC := vfMACsFromNetworkStatus(t, ann)[secondaryNAD]
	require.NotNil(t, vfMAC, "network-status has no VF entry for %s", secondaryNAD)
	nic := vfNICOf(att)

	// A short directory: the monitors' unix socket paths must stay under 108 bytes.
	work, err := os.MkdirTemp("", "sriovudn-mig")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	disk := filepath.Join(work, "disk.img")
	require.NoError(t, copySparse(env.image.Root, disk), "the VM's disk, shared by source and target")
	base := VFBoot{Root: root, Netns: peer.Name, Image: env.image, ISO: iso, Work: work, Disk: disk,
		NICPeers: vfPeers[secondaryNAD], Accel: os.Getenv("GUEST_QEMU_ACCEL")}
	source, target := base, base
	source.Console, target.Console = "console-source.log", "console-target.log"

	bootCtx, cancel := context.WithTimeout(context.Background(), vfBootTimeout)
	defer cancel()
	src, srcQMP, err := startMigrationQemu(context.Background(), source, vfMAC, "source")
	require.NoError(t, err)
	defer src.Stop(0)
	defer srcQMP.Close()
	srcReports := &[]string{}
	t.Cleanup(func() { keepVFArtifacts(t, "vf-migration-source", data, source.ConsoleLog(), srcReports) })
	text, took, err := src.NextReport(bootCtx)
	*srcReports = append(*srcReports, text)
	require.NoError(t, err, "boot the migration's source guest")
	env.record("migration source boot to report", took)
	first := parseVFReport(t, text)
	require.True(t, t.Run("Boot", func(t *testing.T) { checkNICLayers(t, first, peer, []vfNIC{nic}) }), "the source guest")

	ctx, cancel := context.WithTimeout(context.Background(), migrationStepTimeout)
	defer cancel()
	begin := time.Now()
	require.NoError(t, unplugNIC(ctx, srcQMP, migrationNIC, ""), "Unplug: the VF's hot-unplug on the source")
	env.record("migration: unplug on the source", time.Since(begin))

	tgt, tgtQMP, err := startMigrationQemu(context.Background(), target, vfMAC, "target")
	require.NoError(t, err)
	defer tgt.Stop(time.Minute)
	defer tgtQMP.Close()
	tgtReports := &[]string{}
	t.Cleanup(func() { keepVFArtifacts(t, "vf-migration-target", data, target.ConsoleLog(), tgtReports) })
	begin = time.Now()
	require.NoError(t, migrate(ctx, srcQMP, tgtQMP), "Migrate: source -> target")
	env.record("migration: migrate", time.Since(begin))
	require.NoError(t, stopSource(ctx, src))

	begin = time.Now()
	require.NoError(t, plugNIC(ctx, tgtQMP, "vf-tgt", migrationNIC, vfMAC), "Plug: the new VF on the target, same MAC")
	require.NoError(t, tgt.Send("report "+vfMAC.String()))
	text, _, err = tgt.NextReport(ctx)
	*tgtReports = append(*tgtReports, text)
	require.NoError(t, err, "the target guest's report after the plug")
	env.record("migration: plug and report on the target", time.Since(begin))
	after := parseVFReport(t, text)
	t.Run("AfterMigration", func(t *testing.T) {
		checkNICLayers(t, after, peer, []vfNIC{nic})
		t.Run("NoNewBootNoCloudInit", func(t *testing.T) {
			assert.NotEmpty(t, first.Sections["bootid"], "boot id in the report")
			assert.Equal(t, first.Sections["bootid"], after.Sections["bootid"], "the guest's boot id: the migrated guest did not boot again")
			assert.Equal(t, first.CloudInitRuns, after.CloudInitRuns, "cloud-init stages started in this boot: none more on the target")
			assert.JSONEq(t, first.Sections["cloudinit"], after.Sections["cloudinit"], "cloud-init's status.json (each stage's start and end) unchanged")
			assert.Equal(t, first.InstanceID, after.InstanceID)
			assert.Equal(t, map[string]int{"runcmd": 1}, after.UserWork, "the user's runcmd ran once in all")
		})
	})

	begin = time.Now()
	require.NoError(t, unplugNIC(ctx, tgtQMP, migrationNIC, "vf-tgt"), "unplug the same-MAC NIC on the target")
	require.NoError(t, plugNIC(ctx, tgtQMP, "vf-other", "vfother", otherMAC), "plug a NIC with another MAC on the target")
	require.NoError(t, tgt.Send("report "+otherMAC.String()))
	text, _, err = tgt.NextReport(ctx)
	*tgtReports = append(*tgtReports, text)
	require.NoError(t, err, "the target guest's report after the other-MAC plug")
	env.record("migration: other-MAC plug and report", time.Since(begin))
	other := parseVFReport(t, text)
	t.Run("OtherMACStaysUnconfigured", func(t *testing.T) {
		l, ok := other.LinkByMAC(otherMAC.String())
		if assert.Truef(t, ok, "the guest has no NIC with the plugged MAC %s:\n%s", otherMAC, other.Sections["brief"]) {
			assert.Emptyf(t, l.GlobalPrefixes(), "global addresses of guest NIC %s (%s): no config matches its MAC", l.Name, otherMAC)
		}
		_, unit, ok := other.NetworkdUnitFor(otherMAC.String())
		assert.Falsef(t, ok, "a systemd-networkd unit matches %s:\n%s", otherMAC, unit)
		_, ok = other.LinkByMAC(vfMAC.String())
		assert.Falsef(t, ok, "the VF NIC with %s is still in the guest", vfMAC)
		for _, a := range nic.addrs {
			addr := netip.MustParsePrefix(a).Addr()
			pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
			assert.Errorf(t, peer.Ping(pctx, addr), "the peer still reaches the VF's %s through the other-MAC NIC", addr)
			pcancel()
		}
		assert.Equal(t, first.Sections["bootid"], other.Sections["bootid"], "the guest's boot id")
		assert.Equal(t, first.CloudInitRuns, other.CloudInitRuns, "cloud-init stages started in this boot")
	})
}

func TestMigrationQemuArgs_SourceHasTheVFOnItsRootPort_TargetWaitsForTheURI(t *testing.T) {
	mon := &qmpListener{path: "/tmp/x/qmp-source.sock"}
	mac := net.HardwareAddr{0x02, 0x00, 0x00, 0x0a, 0x00, 0x05}
	src := strings.Join(migrationQemuArgs(mon, mac, false), " ")
	assert.Contains(t, src, "-chardev socket,id=qmp-qmp-source.sock,path=/mnt/work/qmp-source.sock -mon chardev=qmp-qmp-source.sock,mode=control", "qemu connects to the test's socket as the chroot sees it")
	assert.Contains(t, src, "-device pcie-root-port,id=vfport,chassis=1 -netdev tap,id=vf-src,ifname=vf0,script=no,downscript=no -device virtio-net-pci,id=vfnic,netdev=vf-src,bus=vfport,mac=02:00:00:0a:00:05,romfile=")
	assert.NotContains(t, src, "-incoming")
	tgt := strings.Join(migrationQemuArgs(mon, mac, true), " ")
	assert.Contains(t, tgt, "-device pcie-root-port,id=vfport,chassis=1 -incoming defer", "the same root port, empty: the VF was unplugged before the migration")
	assert.NotContains(t, tgt, "virtio-net-pci", "the target starts without the VF")
}
