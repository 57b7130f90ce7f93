package guest

import "strings"

// ClusterImageSpec is the guest the VMs of the registry-free cluster boot (test/cluster), as a containerDisk
// with KubeVirt's kernel boot: DefaultImageSpec (Debian 12, cloud-init 22.4.2, netplan and networkd) with
// systemd-resolved (the guest's resolver) and QEMU's guest agent, through which KubeVirt reads the guest's
// interfaces into vmi.status.interfaces (its unit starts when KubeVirt's org.qemu.guest_agent.0 port appears). The report is the default one, written
// to the serial console (ttyS0, the one port a KubeVirt VM has: virt-launcher logs it and `kubectl logs -c
// guest-console-log` prints it) in one write, and the guest stays up after it. The getty on ttyS0 is masked,
// so that its prompt cannot cut into the report.
func ClusterImageSpec() ImageSpec {
	s := DefaultImageSpec()
	// systemd-resolved is the resolver networkd hands a link's DNS= and Domains= to, as in Debian's cloud
	// images: without it they configure nothing. Its dependency on a D-Bus system bus is a virtual package,
	// which debootstrap does not resolve, so dbus is named.
	s.Packages = append(s.Packages, "qemu-guest-agent", "dbus", "systemd-resolved")
	s.Files = map[string]string{}
	for k, v := range DefaultImageSpec().Files {
		s.Files[k] = v
	}
	s.Files["usr/local/sbin/guest-report"] = clusterReportScript()
	s.Links = map[string]string{}
	for k, v := range DefaultImageSpec().Links {
		s.Links[k] = v
	}
	s.Links["etc/systemd/system/serial-getty@ttyS0.service"] = "/dev/null"
	return s
}

// ClusterKernelArgs are the kernel arguments of ClusterImageSpec's guest under KubeVirt's kernel boot: the
// containerDisk (the VM's first disk) is its root, the console is the serial port, and systemd and the
// kernel keep quiet on it once booted so that the report is read whole.
const ClusterKernelArgs = "root=/dev/vda rw console=ttyS0 no_timer_check quiet systemd.show_status=false " + tcgKernelArgs

// clusterReportScript is the default report, gathered into a file and then written to ttyS0 at once, without
// the poweroff.
func clusterReportScript() string {
	return strings.Replace(reportScript, "} >/dev/ttyS1\npoweroff\n", "} >/run/guest-report.txt\ncat /run/guest-report.txt >/dev/ttyS0\n", 1)
}
