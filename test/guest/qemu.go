package guest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// Boot describes one guest boot.
type Boot struct {
	Image Image
	// ISO is the cloud-init disk KubeVirt generated; attached read-only as the second virtio
	// disk, like KubeVirt's cloudinitdisk.
	ISO string
	// Disk, when set, is a writable copy of the image's root that the boot keeps (a VM's disk across
	// restarts); otherwise writes go to a throwaway overlay.
	Disk string
	// NICs get one virtio-net device each, in order, with these MACs: one per VMI interface.
	NICs []net.HardwareAddr
	// GuestFwd is a qemu guestfwd rule for the first NIC's user network ("" = none).
	GuestFwd string
	// ConsoleLog receives the guest console (ttyS0) for diagnosis.
	ConsoleLog string
	MemoryMiB  int
	CPUs       int
	// Accel is qemu's -accel; "" means tcg.
	Accel string
}

// BootResult is what a boot produced.
type BootResult struct {
	// Report is the guest's report text, markers included (ParseReport reads it).
	Report string
	// Took is the time from starting qemu to the end of the report.
	Took time.Duration
}

// QemuArgs returns qemu's command line. The guest network is qemu user-mode networking with
// restrict=on (the guest reaches nothing outside) and ipv6=off (qemu's slirp would otherwise
// send router advertisements, giving every NIC an IPv6 default route the test did not ask for).
// TCG unless Accel says otherwise: KVM is present on some CI machines but has failed under nesting.
func (b Boot) QemuArgs() []string {
	mem, cpus, accel := b.MemoryMiB, b.CPUs, b.Accel
	if mem == 0 {
		mem = 1024
	}
	if cpus == 0 {
		cpus = 1
	}
	if accel == "" {
		accel = "tcg"
	}
	args := []string{
		"-accel", accel,
		"-m", fmt.Sprint(mem),
		"-smp", fmt.Sprint(cpus),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", b.Image.Kernel,
		"-initrd", b.Image.Initrd,
		// No ds= here: KubeVirt passes no kernel arguments; cloud-init finds the ISO by its
		// volume label (cidata for NoCloud, config-2 for ConfigDrive). no_timer_check: under TCG on a
		// loaded host the kernel's IO-APIC timer check can miss its ticks and panic ("IO-APIC + timer
		// doesn't work!", seen with Debian 13's kernel at a load of 30 on 2 cores). norandmaps: see
		// tcgKernelArgs.
		"-append", "root=/dev/vda rw console=ttyS0 no_timer_check " + tcgKernelArgs,
		"-drive", rootDrive(b.Image.Root, b.Disk),
		"-drive", "file=" + b.ISO + ",format=raw,if=virtio,readonly=on",
	}
	for i, mac := range b.NICs {
		id := fmt.Sprintf("nic%d", i)
		netdev := "user,id=" + id + ",restrict=on,ipv6=off"
		if i == 0 && b.GuestFwd != "" {
			netdev += ",guestfwd=" + b.GuestFwd
		}
		args = append(args,
			"-netdev", netdev,
			"-device", "virtio-net-pci,netdev="+id+",mac="+mac.String())
	}
	// ttyS0: console to a file. ttyS1: the report, on qemu's stdout.
	return append(args, "-serial", "file:"+b.ConsoleLog, "-serial", "stdio")
}

// tcgKernelArgs are the guest kernel arguments that only make TCG cheaper. norandmaps turns off the
// guest's address space randomization: TCG keys the code it translated by the guest's virtual address, so
// with randomization every process (each cloud-init stage's python3, every fork and exec of systemd and the
// scripts) maps its libraries at new addresses and has all of their code translated again. Without it the
// translations are reused across processes: a boot took 72 instead of 93 CPU-seconds, measured side by side
// on the same machine. Nothing the tests check depends on where a process's libraries lie; under KVM the
// argument changes nothing measurable.
const tcgKernelArgs = "norandmaps"

// rootDrive is the -drive value of the root disk: the image with a throwaway overlay
// (snapshot=on: the cached image stays pristine and several guests can share it), or disk, kept.
func rootDrive(image, disk string) string {
	if disk != "" {
		return "file=" + disk + ",format=raw,if=virtio"
	}
	return "file=" + image + ",format=raw,if=virtio,snapshot=on"
}

// Run boots the guest and returns as soon as the report is complete (the guest then powers
// itself off; qemu is stopped either way). ctx bounds the whole boot.
func (b Boot) Run(ctx context.Context) (BootResult, error) {
	qemu, err := debroot.FindCommand("qemu-system-x86_64")
	if err != nil {
		return BootResult{}, err
	}
	cmd := exec.CommandContext(ctx, qemu, b.QemuArgs()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return BootResult{}, fmt.Errorf("qemu stdout: %w", err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return BootResult{}, fmt.Errorf("start qemu: %w", err)
	}

	var (
		report   strings.Builder
		complete bool
	)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64*1024), 8<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		report.WriteString(line)
		report.WriteByte('\n')
		if line == reportEnd {
			complete = true
			break
		}
	}
	took := time.Since(start)
	// The guest powers off after the report. A throwaway overlay needs nothing more; a kept disk gets
	// the guest's own clean shutdown (bounded), so that its next start finds what this one wrote.
	if complete && b.Disk != "" {
		done := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, stdout); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
		case <-ctx.Done():
		}
	}
	_ = cmd.Process.Kill()
	waitErr := cmd.Wait()

	res := BootResult{Report: report.String(), Took: took}
	if complete {
		return res, nil
	}
	reason := fmt.Sprintf("qemu exited: %v", waitErr)
	if ctxErr := ctx.Err(); ctxErr != nil {
		reason = fmt.Sprintf("boot timed out after %s: %v", took.Round(time.Second), ctxErr)
	}
	return res, errors.New(reason + "\nqemu stderr: " + stderr.String() +
		"\nreport so far:\n" + res.Report + "\nconsole tail:\n" + consoleTail(b.ConsoleLog, 40))
}

// consoleTail returns the last lines of the console log with terminal escapes removed.
func consoleTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no console log: %v)", err)
	}
	text := strings.ReplaceAll(string(data), "\r", "")
	var kept []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			kept = append(kept, stripEscapes(l))
		}
	}
	if len(kept) > lines {
		kept = kept[len(kept)-lines:]
	}
	return strings.Join(kept, "\n")
}

func stripEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
