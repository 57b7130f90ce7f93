package guest

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVFPlan_OneLinePerVFWithItsPFsMAC(t *testing.T) {
	pfs := []vfPF{
		{MAC: net.HardwareAddr{0x52, 0x54, 0, 0xa0, 0, 0}, VFs: []vfSlot{{0, net.HardwareAddr{2, 0, 0, 0xa, 0, 5}}, {2, net.HardwareAddr{2, 0, 0, 0xa, 0, 6}}}},
		{MAC: net.HardwareAddr{0x52, 0x54, 0, 0xa0, 1, 0}, VFs: []vfSlot{{1, net.HardwareAddr{2, 0, 0, 0x14, 0, 5}}}, Peers: []netip.Prefix{netip.MustParsePrefix("10.100.0.1/16")}},
	}
	assert.Equal(t, "52:54:00:a0:00:00 0 02:00:00:0a:00:05\n52:54:00:a0:00:00 2 02:00:00:0a:00:06\n52:54:00:a0:01:00 1 02:00:00:14:00:05\n", vfPlan(pfs))
	assert.Equal(t, "10.100.0.1\n", peerAddrs(pfs))
}

func TestVFQemuArgs_IgbBehindRootPortOnTapAndPlanInFwCfg(t *testing.T) {
	b := VFBoot{ISO: "/host/ci/noCloud.iso", PodNIC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		PFs: []vfPF{{Tap: "pf0", MAC: net.HardwareAddr{0x52, 0x54, 0, 0xa0, 0, 0}}}}
	args := strings.Join(b.QemuArgs(), " ")
	assert.Contains(t, args, "-machine q35", "igb's SR-IOV needs PCIe")
	assert.Contains(t, args, "-device pcie-root-port,id=rp0,chassis=1 -netdev tap,id=pf0,ifname=pf0,script=no,downscript=no -device igb,netdev=pf0,bus=rp0,mac=52:54:00:a0:00:00,romfile=")
	assert.Contains(t, args, "-fw_cfg name=opt/sriov-udn/vfs,file=/mnt/work/vfs.plan")
	assert.Contains(t, args, "-netdev user,id=pod,restrict=on,ipv6=off -device virtio-net-pci,netdev=pod,mac=02:00:00:00:00:01")
	assert.Contains(t, args, "file=/mnt/image/root.img,format=raw,if=virtio,snapshot=on", "the cached image is never written")
	assert.Contains(t, args, "file=/mnt/iso/noCloud.iso,format=raw,if=virtio,readonly=on")
	assert.Contains(t, args, " norandmaps", "TCG reuses its translations only when libraries keep their addresses")
}

func TestVFImage_ReportStaysUpForTheHostAndSetupRunsBeforeCloudInitLocal(t *testing.T) {
	spec := VFImageSpec()
	assert.Contains(t, spec.Packages, "linux-image-amd64", "linux-image-cloud-amd64 has no igb/igbvf")
	assert.NotContains(t, spec.Packages, "linux-image-cloud-amd64")
	report := spec.Files["usr/local/sbin/guest-report"]
	require.NotEqual(t, reportScript, report)
	assert.Contains(t, report, "section lspci lspci -k", "the VF sections went in before the report's end")
	assert.Less(t, strings.Index(report, "section vfsetup"), strings.Index(report, `echo "@@report-end"`))
	assert.Contains(t, report, "exec /usr/local/sbin/vf-after-report")
	assert.Less(t, strings.Index(report, "section bootid cat /proc/sys/kernel/random/boot_id"), strings.Index(report, `echo "@@report-end"`), "the boot id, which a migration keeps")
	assert.Contains(t, vfAfterReportScript, "report\\ *)", "the host asks a migrated guest for a report")
	assert.NotContains(t, report, "\npoweroff\n", "the host stops the VF guest")
	assert.Contains(t, vfSetupUnit, "Before=cloud-init-local.service")
	assert.Equal(t, "/etc/systemd/system/sriov-vf-setup.service", spec.Links["etc/systemd/system/cloud-init-local.service.wants/sriov-vf-setup.service"])
	assert.NotEqual(t, DefaultImageSpec().Key(), spec.Key())
	assert.Equal(t, reportScript, DefaultImageSpec().Files["usr/local/sbin/guest-report"], "the default image is unchanged")
}
