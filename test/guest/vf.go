package guest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

// vfPF is one igb PF (qemu 10's -device igb, Intel 82576 with SR-IOV) whose wire is a tap in the test's
// network namespace; the tap holds the peer's addresses: the rest of the UDN, as the guest sees it.
type vfPF struct {
	Tap   string
	MAC   net.HardwareAddr
	Peers []netip.Prefix
	// VFs are the VFs the SR-IOV CNI would program on this PF: index and MAC (from network-status).
	VFs []vfSlot
}

// vfSlot is one VF of a PF.
type vfSlot struct {
	Index int
	MAC   net.HardwareAddr
}

// vfPlan is the fw_cfg text sriov-vf-setup reads: one "PF-MAC VF-INDEX VF-MAC" line per VF.
func vfPlan(pfs []vfPF) string {
	var b strings.Builder
	for _, pf := range pfs {
		for _, vf := range pf.VFs {
			fmt.Fprintf(&b, "%s %d %s\n", pf.MAC, vf.Index, vf.MAC)
		}
	}
	return b.String()
}

// peerAddrs is the fw_cfg text of the addresses the guest pings, one per line.
func peerAddrs(pfs []vfPF) string {
	var b strings.Builder
	for _, pf := range pfs {
		for _, p := range pf.Peers {
			b.WriteString(p.Addr().String() + "\n")
		}
	}
	return b.String()
}

// vfNetns is the test's network namespace on the host: one tap per PF, up, with the peer's addresses.
type vfNetns struct {
	Name string
}

// newVFNetns creates the namespace and its taps; the returned cleanup deletes it (and the taps with it).
func newVFNetns(name string, pfs []vfPF) (*vfNetns, func(), error) {
	ip, err := debroot.FindCommand("ip")
	if err != nil {
		return nil, nil, err
	}
	run := func(args ...string) error {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	_ = run("netns", "del", name) // a namespace left by a killed run
	if err := run("netns", "add", name); err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = run("netns", "del", name) }
	steps := [][]string{{"-n", name, "link", "set", "lo", "up"}}
	for _, pf := range pfs {
		steps = append(steps, []string{"-n", name, "tuntap", "add", "dev", pf.Tap, "mode", "tap"})
		for _, p := range pf.Peers {
			a := []string{"-n", name, "addr", "add", p.String(), "dev", pf.Tap}
			if p.Addr().Is6() {
				a = append(a, "nodad")
			}
			steps = append(steps, a)
		}
		steps = append(steps, []string{"-n", name, "link", "set", pf.Tap, "up"})
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	return &vfNetns{Name: name}, cleanup, nil
}

// Ping pings addr from the namespace (the peer) and returns ping's output on failure.
func (n *vfNetns) Ping(ctx context.Context, addr netip.Addr) error {
	ip, err := debroot.FindCommand("ip")
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, ip, "netns", "exec", n.Name, "ping", "-c", "3", "-W", "2", addr.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from the peer's namespace %s: %w\n%s", addr, n.Name, err, out)
	}
	return nil
}

// VFBoot is one boot of the VF guest with qemu 10 from the trixie tools root, in the peer's namespace.
type VFBoot struct {
	Root  trixietools.Root
	Netns string
	Image Image
	ISO   string
	// Work is a host directory for the plan files and the console log; Disk, when set, is a kept root
	// disk inside Work (a VM's disk across restarts).
	Work   string
	Disk   string
	PodNIC net.HardwareAddr // nil: no pod NIC
	PFs    []vfPF
	Accel  string
	// NICPeers are peers the guest pings besides the PFs' (the migration's hot-plugged NIC); Console is
	// the console's file name in Work ("" = console.log: a migration's source and target share Work).
	NICPeers []netip.Prefix
	Console  string
}

// Paths inside the chroot, where vfMounts binds the host's files.
const (
	vfImageDir = "/mnt/image"
	vfWorkDir  = "/mnt/work"
	vfISODir   = "/mnt/iso"
)

func (b VFBoot) mounts() []trixietools.Mount {
	return []trixietools.Mount{
		{Target: "mnt"}, {Target: "var/tmp"}, // a tmpfs for the mount points; snapshot=on's overlay
		{Source: b.Image.Dir, Target: strings.TrimPrefix(vfImageDir, "/")},
		{Source: b.Work, Target: strings.TrimPrefix(vfWorkDir, "/")},
		{Source: filepath.Dir(b.ISO), Target: strings.TrimPrefix(vfISODir, "/")},
	}
}

// ConsoleLog is the host path of the guest console.
func (b VFBoot) ConsoleLog() string { return filepath.Join(b.Work, b.consoleName()) }

func (b VFBoot) consoleName() string {
	if b.Console == "" {
		return "console.log"
	}
	return b.Console
}

// QemuArgs is qemu 10's command line, paths as the chroot sees them: q35 (PCIe), each igb PF behind its
// own pcie-root-port (SR-IOV needs a PCIe slot), its backend the tap in the namespace; the pod NIC on a
// restricted user network; the plan and the peers in fw_cfg.
func (b VFBoot) QemuArgs() []string {
	accel := b.Accel
	if accel == "" {
		accel = "tcg"
	}
	root := vfImageDir + "/root.img"
	rootDrive := "file=" + root + ",format=raw,if=virtio,snapshot=on"
	if b.Disk != "" {
		rootDrive = "file=" + vfWorkDir + "/" + filepath.Base(b.Disk) + ",format=raw,if=virtio"
	}
	args := []string{
		"-accel", accel, "-machine", "q35", "-m", "1024", "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", vfImageDir + "/vmlinuz", "-initrd", vfImageDir + "/initrd.img",
		// no_timer_check: under TCG on a loaded machine the kernel's IO-APIC timer check can fail and
		// panic ("IO-APIC + timer doesn't work!", seen here); panic=-1 with -no-reboot makes any panic end
		// qemu at once instead of hanging until the boot's time limit. tcgKernelArgs: TCG reuses its
		// translations across the guest's processes.
		"-append", "root=/dev/vda rw console=ttyS0 no_timer_check panic=-1 " + tcgKernelArgs,
		"-drive", rootDrive,
		"-drive", "file=" + vfISODir + "/" + filepath.Base(b.ISO) + ",format=raw,if=virtio,readonly=on",
		"-fw_cfg", "name=" + fwCfgVFPlan + ",file=" + vfWorkDir + "/vfs.plan",
		"-fw_cfg", "name=" + fwCfgPeers + ",file=" + vfWorkDir + "/peers",
	}
	if b.PodNIC != nil {
		args = append(args, "-netdev", "user,id=pod,restrict=on,ipv6=off", "-device", "virtio-net-pci,netdev=pod,mac="+b.PodNIC.String())
	}
	for i, pf := range b.PFs {
		args = append(args,
			"-device", fmt.Sprintf("pcie-root-port,id=rp%d,chassis=%d", i, i+1),
			"-netdev", fmt.Sprintf("tap,id=pf%d,ifname=%s,script=no,downscript=no", i, pf.Tap),
			"-device", fmt.Sprintf("igb,netdev=pf%d,bus=rp%d,mac=%s,romfile=", i, i, pf.MAC))
	}
	return append(args, "-serial", "file:"+vfWorkDir+"/"+b.consoleName(), "-serial", "stdio")
}

// vfGuest is a running VF guest: its reports arrive on qemu's stdout (ttyS1), commands go to its stdin.
type vfGuest struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error
	boot  VFBoot
	start time.Time
}

// Start writes the plan files and starts qemu, with extra arguments after QemuArgs.
func (b VFBoot) Start(ctx context.Context, extra ...string) (*vfGuest, error) {
	peers := peerAddrs(append([]vfPF{{Peers: b.NICPeers}}, b.PFs...))
	for name, text := range map[string]string{"vfs.plan": vfPlan(b.PFs), "peers": peers} {
		if err := os.WriteFile(filepath.Join(b.Work, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	cmd, err := b.Root.CommandInNetns(ctx, b.Netns, b.mounts(), "qemu-system-x86_64", append(b.QemuArgs(), extra...)...)
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	// qemu (the command's own pid: nsenter, unshare, sh and chroot exec it) dies with the test process,
	// even when that is killed before its cleanups run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g := &vfGuest{cmd: cmd, stdin: stdin, lines: make(chan string, 1024), done: make(chan error, 1), boot: b, start: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu 10 in the trixie root: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64*1024), 8<<20)
		for sc.Scan() {
			g.lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(g.lines)
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: qemu stderr: %s", err, stderr.String())
		}
		g.done <- err
	}()
	return g, nil
}

// NextReport returns the next complete report (markers included) and the time since qemu started.
func (g *vfGuest) NextReport(ctx context.Context) (string, time.Duration, error) {
	var report strings.Builder
	in := false
	for {
		select {
		case line, ok := <-g.lines:
			if !ok {
				err := <-g.done
				g.done <- err
				return report.String(), time.Since(g.start), fmt.Errorf("qemu exited before the report was complete (%v)\nconsole tail:\n%s",
					err, consoleTail(g.boot.ConsoleLog(), 40))
			}
			if line == reportBegin {
				in = true
			}
			if in {
				report.WriteString(line + "\n")
			}
			if in && line == reportEnd {
				return report.String(), time.Since(g.start), nil
			}
		case <-ctx.Done():
			return report.String(), time.Since(g.start), fmt.Errorf("no complete report after %s: %w\nconsole tail:\n%s",
				time.Since(g.start).Round(time.Second), ctx.Err(), consoleTail(g.boot.ConsoleLog(), 40))
		}
	}
}

// Send writes one command line to the guest's ttyS1.
func (g *vfGuest) Send(cmd string) error {
	_, err := io.WriteString(g.stdin, cmd+"\n")
	return err
}

// Stop asks the guest to power off and waits for qemu (bounded), killing it after the bound: a kept disk
// must see the guest's own clean shutdown.
func (g *vfGuest) Stop(bound time.Duration) {
	_ = g.Send("poweroff")
	go func() {
		for range g.lines { // drain
		}
	}()
	select {
	case err := <-g.done:
		g.done <- err
	case <-time.After(bound):
		_ = g.cmd.Process.Kill()
	}
}

// Uptime is the time since qemu started.
func (g *vfGuest) Uptime() time.Duration { return time.Since(g.start) }
