package guest

// reportScript runs from guest-report.service (reportUnit), after cloud-init's final stage, at every
// boot. It waits, bounded, for NetworkManager's start-up (where it runs) and systemd-networkd to finish
// configuring links and for IPv6 DAD, then writes the
// report to the second serial port and powers off. The second port (ttyS1) carries nothing but
// the report: the console on ttyS0 interleaves kernel and systemd messages. networkctl is not used:
// it needs D-Bus, which a minbase guest lacks; networkd's state files say the same. Besides the
// network it reports what the user's data did (userWorkDir: one line per run of each piece of
// per-instance work) and cloud-init's instance-id.
const reportScript = `#!/bin/sh
# NetworkManager (the NM guest): wait until it has activated what it autoconnects.
command -v nm-online >/dev/null && nm-online -s -q -t 60
i=0
while [ "$i" -lt 30 ]; do
  busy=
  grep -qs '^ADMIN_STATE=configuring' /run/systemd/netif/links/* && busy=1
  [ -n "$(ip -6 addr show tentative)" ] && busy=1
  [ -z "$busy" ] && break
  sleep 1
  i=$((i+1))
done
section() {
  name=$1
  shift
  echo "@@begin $name"
  "$@" 2>&1
  printf '\n@@end %s\n' "$name"
}
files() {
  for f in "$@"; do
    [ -e "$f" ] || continue
    echo "# $f"
    cat "$f"
    echo
  done
}
# What the user's data wrote must be on the disk before the report lets the test stop qemu.
sync
{
  echo "@@report-begin"
  section addr ip -j addr show
  section route4 ip -j -4 route show table main
  section route6 ip -j -6 route show table main
  section brief sh -c 'ip -br addr; ip route; ip -6 route'
  section networkd files /run/systemd/network/*.network
  section leases files /run/systemd/netif/leases/*
  section netplan files /etc/netplan/*.yaml
  section cloudinit cat /run/cloud-init/status.json
  section userwork files /var/lib/guest-test/*.log
  section instance cat /var/lib/cloud/data/instance-id
  section version cloud-init --version
  if command -v nmcli >/dev/null; then
    section nmcli nmcli -t -f GENERAL.DEVICE,GENERAL.HWADDR,GENERAL.STATE,GENERAL.CONNECTION,IP4.ADDRESS,IP4.GATEWAY,IP4.ROUTE,IP6.ADDRESS,IP6.GATEWAY,IP6.ROUTE,DHCP4.OPTION device show
    section nmconnections files /etc/NetworkManager/system-connections/*
  fi
  echo "@@report-end"
} >/dev/ttyS1
poweroff
`

// reportUnit runs reportScript once cloud-init's final stage (runcmd, user scripts) is done. Debian's
// cloud-final.service is ordered After=multi-user.target, so this unit must be too: otherwise
// multi-user.target's implicit After= on the units it wants closes an ordering cycle, which systemd
// breaks by dropping a job.
const reportUnit = `[Unit]
Description=sriov-udn-binding guest test report
After=cloud-final.service multi-user.target
Wants=cloud-final.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/guest-report

[Install]
WantedBy=multi-user.target
`

// userWorkDir holds one log per piece of per-instance user work; each run appends a line.
const userWorkDir = "/var/lib/guest-test"

// userWorkCommand appends a line to userWorkDir/<name>.log.
func userWorkCommand(name string) string {
	return "mkdir -p " + userWorkDir + " && echo ran >> " + userWorkDir + "/" + name + ".log"
}

// cloudConfigUserData is a user's cloud-config whose runcmd (per instance) leaves a trace named name.
func cloudConfigUserData(name string) (string, error) {
	return cloudConfig(map[string]any{
		"runcmd": [][]string{{"sh", "-c", userWorkCommand(name)}},
	})
}

// scriptUserData is a user's shell script (run once per instance by scripts_user).
func scriptUserData(name string) string {
	return "#!/bin/sh\n" + userWorkCommand(name) + "\n"
}

// mimeUserData is a user's MIME multipart: a cloud-config part and a script part.
func mimeUserData(name string) (string, error) {
	cc, err := cloudConfigUserData(name + "-cloud-config")
	if err != nil {
		return "", err
	}
	const b = "==user-boundary=="
	return "Content-Type: multipart/mixed; boundary=\"" + b + "\"\nMIME-Version: 1.0\n\n" +
		"--" + b + "\nContent-Type: text/cloud-config; charset=\"us-ascii\"\n\n" + cc +
		"--" + b + "\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n" + scriptUserData(name+"-script") +
		"--" + b + "--\n", nil
}

// includeUserData is a user's #include of url, which serves cloudConfigUserData(name).
func includeUserData(url string) string {
	return "#include\n" + url + "\n"
}
