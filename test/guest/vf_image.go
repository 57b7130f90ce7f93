package guest

import (
	"strings"
)

// The VF guest's fw_cfg entries (qemu -fw_cfg; the guest reads /sys/firmware/qemu_fw_cfg/by_name/...):
// the VF plan (one "PF-MAC VF-INDEX VF-MAC" line per VF: what the SR-IOV device plugin allocates and the
// SR-IOV CNI programs on a node, the MAC from the pod's network-status) and the peers the guest pings.
const (
	fwCfgVFPlan = "opt/sriov-udn/vfs"
	fwCfgPeers  = "opt/sriov-udn/peers"
)

// VFImageSpec is the Debian 12 guest of the VF scenarios: DefaultImageSpec with Debian's full kernel
// (linux-image-cloud-amd64 has neither igb nor igbvf), lspci, ping, and two units: sriov-vf-setup before
// cloud-init's local stage, and a report that stays up after it, answering the host's commands on ttyS1.
func VFImageSpec() ImageSpec {
	s := DefaultImageSpec()
	var pkgs []string
	for _, p := range s.Packages {
		if p == "linux-image-cloud-amd64" {
			p = "linux-image-amd64"
		}
		pkgs = append(pkgs, p)
	}
	s.Packages = append(pkgs, "pciutils", "iputils-ping", "kmod")
	s.Files = map[string]string{}
	for k, v := range DefaultImageSpec().Files {
		s.Files[k] = v
	}
	s.Files["usr/local/sbin/guest-report"] = vfReportScript()
	s.Files["usr/local/sbin/vf-after-report"] = vfAfterReportScript
	s.Files["usr/local/sbin/sriov-vf-setup"] = vfSetupScript
	s.Files["etc/systemd/system/sriov-vf-setup.service"] = vfSetupUnit
	s.Links = map[string]string{}
	for k, v := range DefaultImageSpec().Links {
		s.Links[k] = v
	}
	s.Links["etc/systemd/system/cloud-init-local.service.wants/sriov-vf-setup.service"] = "/etc/systemd/system/sriov-vf-setup.service"
	return s
}

// vfReportSections are the VF guest's sections beside the default report's: the driver of every PCI
// network device (lspci -k), what sriov-vf-setup did per layer, the guest's own pings of the peers, and how
// often cloud-init started a stage in this boot (a VF that comes back must not start one), and the kernel's
// boot id (a migrated guest must not have booted again).
const vfReportSections = `  section lspci lspci -k -d ::0200
  section vfsetup cat /run/sriov-vf-setup.log
  section guestping sh -c 'for a in $(cat /sys/firmware/qemu_fw_cfg/by_name/` + fwCfgPeers + `/raw); do if ping -c 2 -W 3 "$a" >/dev/null 2>&1; then echo "$a ok"; else echo "$a FAILED"; fi; done'
  section cloudinitruns sh -c 'grep -c "Cloud-init v\. .* running" /var/log/cloud-init.log'
  section bootid cat /proc/sys/kernel/random/boot_id
`

// vfReportScript is the default report with the VF sections, ending in vf-after-report instead of
// poweroff, so that the host can ping the guest and unplug its VFs before it stops.
func vfReportScript() string {
	s := strings.Replace(reportScript, "  echo \"@@report-end\"\n", vfReportSections+"  echo \"@@report-end\"\n", 1)
	return strings.Replace(s, "\npoweroff\n", "\nexec /usr/local/sbin/vf-after-report\n", 1)
}

// vfAfterReportScript waits for the host's command on ttyS1 (qemu's stdin): "replug" unplugs every VF
// (sriov_numvfs 0), plugs it back with the same MAC through the PF, as a migration's unplug and plug look
// to the guest, waits for networkd to give the VFs their addresses again and reports again; "report MAC"
// waits (bounded) until the NIC with that MAC exists and systemd-networkd has decided about it (configured,
// unmanaged or failed: a NIC plugged by the host, as after a migration), then reports again; "poweroff"
// powers off; other lines are ignored (and logged to the console).
const vfAfterReportScript = `#!/bin/sh
stty -F /dev/ttyS1 raw -echo
exec 3</dev/ttyS1
while read -r cmd <&3; do
  cmd=$(printf '%s' "$cmd" | tr -d '\r')
  echo "vf-after-report: command [$cmd]" >/dev/console
  case "$cmd" in
  replug)
    /usr/local/sbin/sriov-vf-setup replug
    i=0
    while [ "$i" -lt 60 ]; do
      missing=
      for mac in $(awk '{print $3}' /sys/firmware/qemu_fw_cfg/by_name/` + fwCfgVFPlan + `/raw); do
        dev=$(ip -br link | awk -v m="$mac" '$3 == m {print $1}')
        [ -n "$dev" ] && [ -n "$(ip -4 addr show dev "$dev" scope global)" ] && [ -n "$(ip -6 addr show dev "$dev" scope global)" ] || missing=1
      done
      [ -z "$missing" ] && break
      sleep 1
      i=$((i+1))
    done
    exec /usr/local/sbin/guest-report
    ;;
  report\ *)
    mac=${cmd#report }
    udevadm settle -t 60
    i=0
    while [ "$i" -lt 120 ]; do
      dev=$(ip -br link | awk -v m="$mac" '$3 == m {print $1}')
      if [ -n "$dev" ]; then
        state=$(sed -n 's/^ADMIN_STATE=//p' "/run/systemd/netif/links/$(cat "/sys/class/net/$dev/ifindex")" 2>/dev/null)
        case "$state" in configured|unmanaged|failed|linger) break ;; esac
      fi
      sleep 1
      i=$((i+1))
    done
    echo "vf-after-report: NIC $mac is [$dev], networkd state [$state] after ${i}s" >/dev/console
    exec /usr/local/sbin/guest-report
    ;;
  poweroff)
    exec poweroff
    ;;
  esac
done
echo "vf-after-report: ttyS1 closed" >/dev/console
poweroff
`

// vfSetupScript does on the guest what the SR-IOV device plugin and CNI do on a node before the pod
// starts: create each PF's VFs (sriov_numvfs) with driver autoprobe off, set each VF's MAC through its PF
// (ip link set PF vf N mac M: a bound igbvf keeps its old MAC), then bind igbvf. "replug" first removes
// every VF (sriov_numvfs 0). Each step logs "<layer> ok|FAILED: ..." to /run/sriov-vf-setup.log
// (layers: vf-creation, mac), which the report carries.
const vfSetupScript = `#!/bin/sh
log=/run/sriov-vf-setup.log
say() { echo "$*" >>"$log"; echo "sriov-vf-setup: $*" >/dev/console; }
fail() { say "$1 FAILED: $2"; exit 1; }
modprobe qemu_fw_cfg
plan=/sys/firmware/qemu_fw_cfg/by_name/` + fwCfgVFPlan + `/raw
[ -r "$plan" ] || fail vf-creation "no VF plan at $plan"
modprobe igb || fail vf-creation "modprobe igb"
udevadm settle -t 60
pf_of() {
  for d in /sys/class/net/*; do
    if [ "$(cat "$d/address")" = "$1" ]; then basename "$d"; return 0; fi
  done
  return 1
}
for pfmac in $(awk '{print $1}' "$plan" | sort -u); do
  pf=$(pf_of "$pfmac") || fail vf-creation "no PF with MAC $pfmac"
  dev=/sys/class/net/$pf/device
  n=$(awk -v m="$pfmac" '$1 == m && $2 + 1 > n {n = $2 + 1} END {print n}' "$plan")
  if [ "$1" = replug ]; then
    echo 0 >"$dev/sriov_numvfs" || fail vf-creation "$pf sriov_numvfs=0"
    say "vf-creation ok: $pf sriov_numvfs=0 (unplugged)"
  fi
  echo 0 >"$dev/sriov_drivers_autoprobe" || fail vf-creation "$pf sriov_drivers_autoprobe=0"
  echo "$n" >"$dev/sriov_numvfs" || fail vf-creation "$pf sriov_numvfs=$n (sriov_totalvfs $(cat "$dev/sriov_totalvfs"))"
  say "vf-creation ok: $pf ($(basename "$(readlink -f "$dev")")) sriov_numvfs=$n"
  # The PF shares this kernel here (on a node it would not): it must not answer ARP or ND for the VFs'
  # addresses, nor configure itself.
  sysctl -qw "net.ipv4.conf.$pf.arp_ignore=1" "net.ipv6.conf.$pf.disable_ipv6=1"
  ip link set "$pf" up
done
modprobe igbvf || fail vf-creation "modprobe igbvf"
while read -r pfmac idx vfmac; do
  pf=$(pf_of "$pfmac")
  ip link set "$pf" vf "$idx" mac "$vfmac" || fail mac "ip link set $pf vf $idx mac $vfmac"
  vf=$(basename "$(readlink -f "/sys/class/net/$pf/device/virtfn$idx")")
  echo igbvf >"/sys/bus/pci/devices/$vf/driver_override"
  echo "$vf" >/sys/bus/pci/drivers_probe
  i=0
  while [ ! -d "/sys/bus/pci/devices/$vf/net" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  [ -d "/sys/bus/pci/devices/$vf/net" ] || fail vf-creation "VF $idx of $pf ($vf): igbvf made no netdev"
  got=$(cat /sys/bus/pci/devices/$vf/net/*/address)
  [ "$got" = "$vfmac" ] || fail mac "VF $idx of $pf ($vf) has MAC $got, want $vfmac"
  say "mac ok: VF $idx of $pf ($vf) $(ls /sys/bus/pci/devices/$vf/net) $got"
done <"$plan"
udevadm settle -t 60
`

// vfSetupUnit runs vfSetupScript before cloud-init's local stage, which renames NICs by MAC and aborts
// when an expected MAC is missing, and after udev has seen the PCI devices.
const vfSetupUnit = `[Unit]
Description=sriov-udn-binding guest test: create VFs and set their MACs through the PF
DefaultDependencies=no
After=systemd-udev-trigger.service systemd-modules-load.service
Wants=systemd-udev-trigger.service
Before=cloud-init-local.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/sriov-vf-setup
`
