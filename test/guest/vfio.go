package guest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// VFIONodePackages are the node guest's root (Debian trixie, mmdebstrap): the kernel (6.12: intel-iommu,
// vfio-pci, igb, igbvf) with its initramfs; qemu 10 and libvirt 11.3 (the versions of the trixie tools
// root, test/internal/trixietools), which start the nested guest; busybox-static, the nested guest's whole
// userland; xz-utils to unpack the igbvf module for it; iproute2, kmod and pciutils for the node's steps.
var VFIONodePackages = []string{
	"linux-image-amd64", "initramfs-tools", "qemu-system-x86", "libvirt-daemon", "libvirt-daemon-driver-qemu",
	"libvirt-clients", "busybox-static", "xz-utils", "iproute2", "kmod", "pciutils",
}

// VFIONodeSpec is the node root's cache spec.
func VFIONodeSpec() debroot.Spec {
	return debroot.Spec{Suite: "trixie", Packages: VFIONodePackages, Tool: "mmdebstrap"}
}

// vfioNodeInit is the node's init (kernel init=): no systemd, which would cost minutes of TCG; it mounts
// what the steps need and runs the node script the test passes in fw_cfg.
const vfioNodeInit = `#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/log
modprobe qemu_fw_cfg
exec /bin/sh /sys/firmware/qemu_fw_cfg/by_name/` + fwCfgVFIONode + `/raw
`

// The node's fw_cfg entries: its script, the plan ("PF-MAC VF-MAC VF-PCI-ADDRESS": the VF's MAC from
// network-status, its host PCI address from the pod's device-info), the nested domain XML and the nested
// guest's init.
const (
	fwCfgVFIONode   = "opt/sriov-udn/node"
	fwCfgVFIOPlan   = "opt/sriov-udn/plan"
	fwCfgVFIODomain = "opt/sriov-udn/domain"
	fwCfgVFIONested = "opt/sriov-udn/nested-init"
)

// VFIONodeImage is the node's cached root disk, built from the node root with mkfs.ext4 -d, plus its
// kernel and initrd.
type VFIONodeImage struct {
	Dir    string
	Root   string
	Kernel string // names under Dir
	Initrd string
}

// EnsureVFIONodeImage returns the node image for the node root rootDir, building it under cacheDir when
// missing (flock, as EnsureImage).
func EnsureVFIONodeImage(ctx context.Context, cacheDir, rootDir string, logf func(string, ...any)) (VFIONodeImage, bool, error) {
	sum := sha256.Sum256([]byte(rootDir + "\n" + vfioNodeInit))
	key := "vfio-node-" + hex.EncodeToString(sum[:])[:16]
	dir := filepath.Join(cacheDir, key)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return VFIONodeImage{}, false, fmt.Errorf("node image cache %s: %w", cacheDir, err)
	}
	unlock, err := debroot.Lock(filepath.Join(cacheDir, key+".lock"))
	if err != nil {
		return VFIONodeImage{}, false, err
	}
	defer unlock()
	img := VFIONodeImage{Dir: dir, Root: filepath.Join(dir, "node.img"), Kernel: "vmlinuz", Initrd: "initrd.img"}
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return img, false, nil
	}
	_ = os.RemoveAll(dir)
	work, err := os.MkdirTemp(cacheDir, key+".build-")
	if err != nil {
		return VFIONodeImage{}, false, fmt.Errorf("node image build dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	for name, glob := range map[string]string{"vmlinuz": "boot/vmlinuz-*", "initrd.img": "boot/initrd.img-*"} {
		m, _ := filepath.Glob(filepath.Join(rootDir, glob))
		if len(m) != 1 {
			return VFIONodeImage{}, false, fmt.Errorf("node root %s: want one %s, found %v", rootDir, glob, m)
		}
		if err := debroot.CopyFile(m[0], filepath.Join(work, name)); err != nil {
			return VFIONodeImage{}, false, err
		}
	}
	initFile := filepath.Join(work, "init")
	if err := os.WriteFile(initFile, []byte(vfioNodeInit), 0o755); err != nil {
		return VFIONodeImage{}, false, err
	}
	start := time.Now()
	rootImg := filepath.Join(work, "node.img")
	if err := debroot.Run(ctx, filepath.Join(work, "mkfs.log"), "mkfs.ext4", "-q", "-F", "-L", "node", "-d", rootDir, rootImg, "3G"); err != nil {
		return VFIONodeImage{}, false, fmt.Errorf("mkfs.ext4 of the node root: %w", err)
	}
	cmds := filepath.Join(work, "debugfs.cmds")
	if err := os.WriteFile(cmds, []byte("cd /usr/local/sbin\nwrite "+initFile+" sriov-udn-node-init\nsif sriov-udn-node-init mode 0100755\n"), 0o644); err != nil {
		return VFIONodeImage{}, false, err
	}
	if err := debroot.Run(ctx, filepath.Join(work, "debugfs.log"), "debugfs", "-w", "-f", cmds, rootImg); err != nil {
		return VFIONodeImage{}, false, fmt.Errorf("debugfs: write the node's init: %w", err)
	}
	logf("vfio node image: mkfs.ext4 and init took %s", time.Since(start).Round(time.Second))
	if err := os.WriteFile(filepath.Join(work, "done"), nil, 0o644); err != nil {
		return VFIONodeImage{}, false, err
	}
	if err := os.Rename(work, dir); err != nil {
		return VFIONodeImage{}, false, fmt.Errorf("move node image into cache: %w", err)
	}
	return img, true, nil
}

// vfioStartLimit bounds one "virsh start" of the nested domain in the node, in seconds. A start normally
// returns within a minute of the node's time (the "[node uptime]" stamps of the report show it); one that
// hangs would otherwise hold the test until vfioTimeout.
const vfioStartLimit = "300"

// vfioNestedLimit bounds the nested guest's run from its start to the end of its report, in seconds of the
// node's time: its boot, igbvf and the pings take about 100 s on an idle machine.
const vfioNestedLimit = "900"

// vfioNodeScript runs in the node guest (TCG, virtual IOMMU): what the SR-IOV device plugin and CNI do on a
// node (create the VF, set its MAC through the PF), then what KubeVirt expects with managed='no' (the VF
// bound to vfio-pci before libvirt starts), then libvirt 11.3 starts the nested domain. Each step prints
// "@@vfio <layer> ok|FAILED: ..." on ttyS1 (qemu's stdout); the nested guest's console follows as
// "@@nested ..." lines; "@@vfio-end" ends it. A failure prints the log of the layer that failed.
const vfioNodeScript = `#!/bin/sh
exec 2>/dev/console
stty -F /dev/ttyS1 raw -echo 2>/dev/null
out() { echo "$*" >/dev/ttyS1; echo "vfio-node: $*" >/dev/console; }
up() { cut -d' ' -f1 /proc/uptime; }
ok() { out "@@vfio $1 ok: $2 [node uptime $(up) s]"; }
end() { out "@@vfio-end"; sync; poweroff -f; }
logs() { for f in "$@"; do [ -r "$f" ] && tail -n 60 "$f" | sed "s|^|@@log $f: |" >/dev/ttyS1; done; }
fail() {
  out "@@vfio $1 FAILED: $2 [node uptime $(up) s]"
  shift 2
  logs "$@"
  end
}
# stuck names what a start that did not return leaves behind: qemu's and libvirtd's state and kernel stacks,
# and the kernel's last lines (a task blocked in vfio or the IOMMU shows there).
stuck() {
  {
    for d in /proc/[0-9]*; do
      c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)
      case "$c" in
      *qemu-system*|*libvirtd*|*virsh*)
        echo "${d#/proc/} $(grep '^State:' "$d/status" | tr -s '\t ' ' ') wchan=$(cat "$d/wchan") $c"
        sed 's/^/  /' "$d/stack" ;;
      esac
    done
    cat /proc/loadavg
    dmesg | tail -n 30
  } >/run/stuck.log 2>&1
}
fw=/sys/firmware/qemu_fw_cfg/by_name
read -r pfmac vfmac vfaddr <"$fw/` + fwCfgVFIOPlan + `/raw"

dmesg >/run/dmesg.boot
n=$(ls /sys/kernel/iommu_groups | wc -l)
[ "$n" -gt 0 ] || { dmesg | grep -i -e DMAR -e iommu >/run/iommu.log; fail iommu "no IOMMU groups" /run/iommu.log; }
ok iommu "$n IOMMU groups ($(dmesg | grep -m1 -o 'DMAR: Intel(R) Virtualization Technology for Directed I/O'))"

modprobe igb || fail vf-creation "modprobe igb"
pf=
i=0
while [ -z "$pf" ] && [ "$i" -lt 60 ]; do
  for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$pfmac" ] && pf=${d##*/}; done
  [ -n "$pf" ] || { sleep 1; i=$((i+1)); }
done
[ -n "$pf" ] || fail vf-creation "no PF with MAC $pfmac"
dev=/sys/class/net/$pf/device
echo 0 >"$dev/sriov_drivers_autoprobe" || fail vf-creation "$pf sriov_drivers_autoprobe=0"
echo 1 >"$dev/sriov_numvfs" || fail vf-creation "$pf sriov_numvfs=1 (sriov_totalvfs $(cat "$dev/sriov_totalvfs"))"
vf=$(basename "$(readlink -f "$dev/virtfn0")")
ok vf-creation "$pf ($(basename "$(readlink -f "$dev")"), driver igb) sriov_numvfs=1, VF 0 at $vf"
[ "$vf" = "$vfaddr" ] || fail vf-address "VF 0 of $pf is at $vf; the pod's device-info (and so the hostdev) says $vfaddr"
ok vf-address "$vf is the hostdev's source address"

sysctl -qw "net.ipv6.conf.$pf.disable_ipv6=1"
ip link set "$pf" up || fail mac "ip link set $pf up"
ip link set "$pf" vf 0 mac "$vfmac" || fail mac "ip link set $pf vf 0 mac $vfmac"
ip link show "$pf" >/run/pf.link
grep -qi "vf 0 .*link/ether $vfmac" /run/pf.link || fail mac "the PF does not show VF 0 with $vfmac" /run/pf.link
ok mac "VF 0 of $pf has $vfmac (set through the PF)"

modprobe vfio-pci || fail vfio "modprobe vfio-pci"
group=$(basename "$(readlink -f "/sys/bus/pci/devices/$vf/iommu_group")")
echo vfio-pci >"/sys/bus/pci/devices/$vf/driver_override" || fail vfio "driver_override of $vf"
echo "$vf" >/sys/bus/pci/drivers_probe
drv=$(basename "$(readlink -f "/sys/bus/pci/devices/$vf/driver")")
[ "$drv" = vfio-pci ] || { dmesg | tail -n 30 >/run/vfio.log; fail vfio "$vf is bound to [$drv], not vfio-pci" /run/vfio.log; }
[ -e "/dev/vfio/$group" ] || fail vfio "no /dev/vfio/$group"
ok vfio "$vf on vfio-pci, IOMMU group $group holds $(ls "/sys/kernel/iommu_groups/$group/devices" | tr '\n' ' ')"

r=/run/nested/root
mkdir -p "$r/bin" "$r/proc" "$r/sys" "$r/dev"
cp /bin/busybox "$r/bin/busybox"
ko=$(modinfo -n igbvf) || fail nested-initrd "modinfo igbvf"
case "$ko" in
*.xz) xz -dc "$ko" ;;
*.zst) zstd -dc "$ko" ;;
*) cat "$ko" ;;
esac >"$r/igbvf.ko" || fail nested-initrd "unpack $ko"
cp "$fw/` + fwCfgVFIONested + `/raw" "$r/init" && chmod 755 "$r/init"
(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1) >/run/nested/initrd.gz || fail nested-initrd "cpio"
kernel=$(ls /boot/vmlinuz-* | head -n 1)
sed "s|@KERNEL@|$kernel|" "$fw/` + fwCfgVFIODomain + `/raw" >/run/nested/domain.xml
ok nested-initrd "kernel $kernel, initramfs $(wc -c </run/nested/initrd.gz) bytes (busybox, igbvf.ko)"

mkdir -p /etc/libvirt /run/libvirt /var/lib/libvirt /var/log/libvirt/qemu
# No systemd, cgroups, security driver or per-domain /dev namespace in this node: the node's root is not
# a shared mount, so libvirt's namespace set-up cannot move /dev/pts ("Unable to move /dev/pts mount",
# seen here); none of them takes part in how libvirt hands a VF to qemu.
printf 'user = "root"\ngroup = "root"\nsecurity_driver = "none"\ncgroup_controllers = [ ]\nnamespaces = [ ]\nstdio_handler = "file"\n' >/etc/libvirt/qemu.conf
LIBVIRT_LOG_OUTPUTS="3:file:/run/libvirtd.log" libvirtd -d || fail libvirt "libvirtd -d" /run/libvirtd.log
i=0
until virsh -c qemu:///system version >/run/virsh.version 2>&1; do
  i=$((i+1)); [ "$i" -lt 120 ] || fail libvirt "libvirtd does not answer" /run/virsh.version /run/libvirtd.log
  sleep 1
done
ok libvirt "$(grep -i 'running hypervisor\|using library' /run/virsh.version | tr '\n' ';')"
virsh -c qemu:///system define /run/nested/domain.xml >/run/define.out 2>&1 || fail libvirt-define "$(tr '\n' ' ' </run/define.out)" /run/libvirtd.log
ok libvirt-define "$(tr '\n' ' ' </run/define.out)"
# A start is bounded (vfioStartLimit): one that fails or does not return is reported with what it left behind
# (@@vfio-note and @@log lines, which the test prints), the domain destroyed, and started once more. A second
# failure fails the layer. start says in $why how an attempt ended.
start() {
  timeout "$1" virsh -c qemu:///system start nested >/run/start.out 2>&1
  rc=$?
  why="exit $rc: $(tr '\n' ' ' </run/start.out)"
  [ "$rc" != 124 ] || why="no return within $1 s"
  return "$rc"
}
retried=
if ! start ` + vfioStartLimit + `; then
  stuck
  out "@@vfio-note libvirt-start: the first start failed ($why) [node uptime $(up) s]"
  logs /run/stuck.log /var/log/libvirt/qemu/nested.log /run/libvirtd.log
  timeout 60 virsh -c qemu:///system destroy nested >/run/destroy.out 2>&1
  start ` + vfioStartLimit + ` || { stuck; fail libvirt-start "the second start failed too ($why; the destroy between them: $(tr '\n' ' ' </run/destroy.out))" /run/stuck.log /var/log/libvirt/qemu/nested.log /run/libvirtd.log; }
  retried=" (the second start)"
fi
virsh -c qemu:///system dumpxml nested | tr -d '\n' | grep -o '<hostdev.*</hostdev>' | tr -s ' ' >/run/hostdev.live
ok libvirt-start "$(cat /run/hostdev.live)$retried"

# The nested guest must stay running and end its report within vfioNestedLimit seconds of its start.
(
  waited=0
  while sleep 15; do
    waited=$((waited+15))
    s=$(virsh -c qemu:///system domstate nested 2>&1)
    case "$s" in running*) ;; *) fail nested "the nested domain is [$s] before its report ended" /var/log/libvirt/qemu/nested.log ;; esac
    [ "$waited" -lt ` + vfioNestedLimit + ` ] || { stuck; fail nested "no end of its report within ` + vfioNestedLimit + ` s of its start" /run/stuck.log /run/nested/console.log /var/log/libvirt/qemu/nested.log; }
  done
) &
touch /run/nested/console.log
tail -n +1 -f /run/nested/console.log | while IFS= read -r line; do
  out "@@nested $line"
  case "$line" in *@@nested-end*) ok nested "report complete"; end ;; esac
done
`

// vfioNestedInit is the nested guest's init (busybox): load igbvf, report the VF's driver, MAC and PCI
// address, give it the addresses from the sidecar's network config (kernel command line
// sriovudn_addrs=...) and ping the peers (sriovudn_peers=...). Lines start "@@nested-"; the node relays
// them.
const vfioNestedInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tr ',' ' '; }
echo "@@nested-begin $(uname -r)"
insmod /igbvf.ko || echo "@@nested-driver FAILED: insmod igbvf"
dev=
i=0
while [ -z "$dev" ] && [ "$i" -lt 120 ]; do
  for d in /sys/class/net/*; do [ -e "$d/device" ] && dev=${d##*/}; done
  [ -n "$dev" ] || { sleep 1; i=$((i+1)); }
done
if [ -z "$dev" ]; then
  echo "@@nested-nic FAILED: no netdev; lspci: $(lspci -k 2>&1 | tr '\n' ';')"
else
  echo "@@nested-nic $dev driver=$(basename "$(readlink "/sys/class/net/$dev/device/driver")") mac=$(cat "/sys/class/net/$dev/address") pci=$(basename "$(readlink "/sys/class/net/$dev/device")")"
  # busybox ip has no nodad: the peer is the only other host on the link, so no DAD.
  echo 0 >"/proc/sys/net/ipv6/conf/$dev/accept_dad"
  ip link set "$dev" up
  for a in $(arg sriovudn_addrs); do ip addr add "$a" dev "$dev"; done
  i=0
  while [ "$(cat "/sys/class/net/$dev/carrier" 2>/dev/null)" != 1 ] && [ "$i" -lt 60 ]; do sleep 1; i=$((i+1)); done
  echo "@@nested-addrs $(ip -o addr show dev "$dev" scope global | awk '{print $4}' | tr '\n' ' ')"
  for p in $(arg sriovudn_peers); do
    if ping -c 3 -W 5 "$p" >/dev/null 2>&1; then echo "@@nested-ping $p ok"; else echo "@@nested-ping $p FAILED"; fi
  done
fi
echo "@@nested-end"
poweroff -f
`

// hostdevElements returns each <hostdev> element of a domain XML byte for byte, as OnDefineDomain wrote it.
func hostdevElements(domainXML []byte) ([]string, error) {
	dec := xml.NewDecoder(bytes.NewReader(domainXML))
	var out []string
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("domain XML from OnDefineDomain: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "hostdev" {
			if err := dec.Skip(); err != nil {
				return nil, fmt.Errorf("domain XML from OnDefineDomain, <hostdev>: %w", err)
			}
			out = append(out, string(domainXML[start:dec.InputOffset()]))
		}
	}
}

// nestedDomainXML is the nested guest's domain: KubeVirt's whole domain needs virt-launcher (its sockets,
// its cgroup, its disks), so the nested domain is the smallest that boots a kernel and initramfs under TCG,
// and the <hostdev> elements are the sidecar's, unchanged. @KERNEL@ is the node's kernel path.
func nestedDomainXML(hostdevs []string, cmdline string) string {
	var b strings.Builder
	b.WriteString("<domain type='qemu'>\n  <name>nested</name>\n  <memory unit='MiB'>256</memory>\n  <vcpu>1</vcpu>\n")
	b.WriteString("  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n    <kernel>@KERNEL@</kernel>\n")
	b.WriteString("    <initrd>/run/nested/initrd.gz</initrd>\n    <cmdline>")
	_ = xml.EscapeText(&b, []byte(cmdline))
	b.WriteString("</cmdline>\n  </os>\n  <features><acpi/></features>\n  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>destroy</on_reboot>\n")
	b.WriteString("  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n")
	b.WriteString("    <serial type='file'><source path='/run/nested/console.log'/><target port='0'/></serial>\n")
	b.WriteString("    <controller type='usb' model='none'/>\n    <memballoon model='none'/>\n")
	for _, h := range hostdevs {
		b.WriteString("    " + h + "\n")
	}
	b.WriteString("  </devices>\n</domain>\n")
	return b.String()
}

// staticAddrsForMAC returns the static addresses (CIDR) the NoCloud v1 network config gives the NIC with
// mac: the addresses the sidecar wrote for it.
func staticAddrsForMAC(networkData, mac string) ([]string, error) {
	var doc struct {
		Network *struct {
			Config []map[string]any `yaml:"config"`
		} `yaml:"network"`
		Config []map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal([]byte(networkData), &doc); err != nil {
		return nil, fmt.Errorf("network data from the sidecar: %w", err)
	}
	cfg := doc.Config
	if doc.Network != nil {
		cfg = doc.Network.Config
	}
	var out []string
	for _, c := range cfg {
		if m, _ := c["mac_address"].(string); !strings.EqualFold(m, mac) {
			continue
		}
		subnets, _ := c["subnets"].([]any)
		for _, s := range subnets {
			sm, _ := s.(map[string]any)
			if a, ok := sm["address"].(string); ok && a != "" {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("network data from the sidecar has no static address for MAC %s:\n%s", mac, networkData)
	}
	return out, nil
}

// vfioNode is one boot of the node guest: qemu 10 of the trixie tools root, in the peer's namespace.
type vfioNode struct {
	Root   trixietools.Root
	Netns  string
	Image  VFIONodeImage
	Work   string // host dir: the fw_cfg files and the console
	PFMAC  string
	PFTap  string
	Accel  string
	Memory string
}

// ConsoleLog is the host path of the node's console (ttyS0, where the nested guest's lines are not).
func (n vfioNode) ConsoleLog() string { return filepath.Join(n.Work, "console.log") }

// QemuArgs is the node's command line: q35 with the split irqchip and a virtual Intel IOMMU (interrupt
// remapping; caching-mode, which vfio in the node needs to map the nested guest's memory), the igb PF behind
// a pcie-root-port, the node kernel with intel_iommu=on, tcgKernelArgs and init= the node's own init.
func (n vfioNode) QemuArgs() []string {
	accel := n.Accel
	if accel == "" {
		accel = "tcg"
	}
	return []string{
		"-accel", accel, "-machine", "q35,kernel-irqchip=split", "-cpu", "max", "-m", n.Memory, "-smp", "2",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-device", "intel-iommu,intremap=on,caching-mode=on",
		"-kernel", "/mnt/image/" + n.Image.Kernel, "-initrd", "/mnt/image/" + n.Image.Initrd,
		"-append", "root=/dev/vda rw console=ttyS0 intel_iommu=on no_timer_check panic=-1 " + tcgKernelArgs + " init=/usr/local/sbin/sriov-udn-node-init",
		"-drive", "file=/mnt/image/node.img,format=raw,if=virtio,snapshot=on",
		"-fw_cfg", "name=" + fwCfgVFIONode + ",file=/mnt/work/node.sh",
		"-fw_cfg", "name=" + fwCfgVFIOPlan + ",file=/mnt/work/plan",
		"-fw_cfg", "name=" + fwCfgVFIODomain + ",file=/mnt/work/domain.xml",
		"-fw_cfg", "name=" + fwCfgVFIONested + ",file=/mnt/work/nested-init",
		"-device", "pcie-root-port,id=rp0,chassis=1",
		"-netdev", "tap,id=pf0,ifname=" + n.PFTap + ",script=no,downscript=no",
		"-device", "igb,netdev=pf0,bus=rp0,mac=" + n.PFMAC + ",romfile=",
		"-serial", "file:/mnt/work/console.log", "-serial", "stdio",
	}
}

// Run writes the fw_cfg files, boots the node and returns every "@@" line up to "@@vfio-end" (or what came
// before qemu exited or ctx ended, with the error).
func (n vfioNode) Run(ctx context.Context, plan, domainXML string) ([]string, error) {
	for name, text := range map[string]string{"node.sh": vfioNodeScript, "plan": plan, "domain.xml": domainXML, "nested-init": vfioNestedInit} {
		if err := os.WriteFile(filepath.Join(n.Work, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	mounts := []trixietools.Mount{{Target: "mnt"}, {Target: "var/tmp"}, {Source: n.Image.Dir, Target: "mnt/image"}, {Source: n.Work, Target: "mnt/work"}}
	cmd, err := n.Root.CommandInNetns(ctx, n.Netns, mounts, "qemu-system-x86_64", n.QemuArgs()...)
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the node's qemu 10: %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if i := strings.Index(line, "@@"); i >= 0 {
			lines = append(lines, line[i:])
		}
		if strings.HasPrefix(line, "@@vfio-end") {
			return lines, nil
		}
	}
	if ctx.Err() != nil {
		return lines, fmt.Errorf("the node's report did not end: %w", ctx.Err())
	}
	return lines, fmt.Errorf("the node's qemu exited before its report ended: %s", strings.TrimSpace(stderr.String()))
}

// vfioLayers maps "@@vfio <layer> ok|FAILED: text" lines to layer -> "ok: text" | "FAILED: text".
func vfioLayers(lines []string) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "@@vfio ")
		if !ok {
			continue
		}
		layer, verdict, _ := strings.Cut(rest, " ")
		out[layer] = verdict
	}
	return out
}

// nestedLines returns the nested guest's "@@nested-<key> ..." lines relayed by the node, by key.
func nestedLines(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "@@nested ")
		if !ok {
			continue
		}
		i := strings.Index(rest, "@@nested-")
		if i < 0 {
			continue
		}
		key, val, _ := strings.Cut(strings.TrimPrefix(rest[i:], "@@nested-"), " ")
		out[key] = append(out[key], val)
	}
	return out
}
