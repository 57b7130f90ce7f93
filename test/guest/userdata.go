package guest

// reportScript runs from the user data's runcmd (cloud-final, after networking is up). It waits,
// bounded, for systemd-networkd to finish configuring links and for IPv6 DAD, then writes the
// report to the second serial port and powers off. The second port (ttyS1) carries nothing but
// the report: the console on ttyS0 interleaves kernel and systemd messages. networkctl is not used:
// it needs D-Bus, which a minbase guest lacks; networkd's state files say the same.
const reportScript = `#!/bin/sh
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
  echo "@@report-end"
} >/dev/ttyS1
poweroff
`

// reportUserData is the user's cloud-config in every scenario: it installs and runs the report.
// Built with a marshaller like everything else the test feeds cloud-init.
func reportUserData() (string, error) {
	return cloudConfig(map[string]any{
		"write_files": []map[string]any{{
			"path":        "/usr/local/sbin/guest-report",
			"permissions": "0755",
			"content":     reportScript,
		}},
		"runcmd": [][]string{{"/usr/local/sbin/guest-report"}},
	})
}
