package trixietools

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// Mount is one extra mount inside the root for one command: Source (a host path) bound at Target (a path
// inside the root), or a fresh tmpfs at Target when Source is "".
type Mount struct {
	Source string
	Target string
}

// Command returns a command that runs name with args chrooted into the root, in a mount namespace of its
// own (unshare -m, propagation private) holding /proc, /sys, /dev and mounts: those mounts exist only for
// that process and its children and vanish with them, so nothing is left mounted in the cached root and
// concurrent commands (other tests, other runs) do not see each other's. The command's pid is the tool's
// own (unshare, sh and chroot each exec the next), which a daemon's socket activation relies on.
func (r Root) Command(ctx context.Context, mounts []Mount, name string, args ...string) (*exec.Cmd, error) {
	return r.CommandInNetns(ctx, "", mounts, name, args...)
}

// CommandInNetns is Command run in the network namespace netns (a name under /run/netns, as `ip netns add`
// makes it; "" keeps the caller's): qemu opening a tap that lives there.
func (r Root) CommandInNetns(ctx context.Context, netns string, mounts []Mount, name string, args ...string) (*exec.Cmd, error) {
	unshare, err := debroot.FindCommand("unshare")
	if err != nil {
		return nil, err
	}
	chroot, err := debroot.FindCommand("chroot")
	if err != nil {
		return nil, err
	}
	script := mountScript(r.Dir, mounts) + "export LISTEN_PID=$$\nexec " + shellQuote(chroot) + " " + shellQuote(r.Dir) + ` "$@"`
	full := append([]string{unshare, "-m", "--propagation", "private", "--", "/bin/sh", "-ec", script, "sh", name}, args...)
	if netns != "" {
		nsenter, err := debroot.FindCommand("nsenter")
		if err != nil {
			return nil, err
		}
		full = append([]string{nsenter, "--net=/run/netns/" + netns, "--"}, full...)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = debroot.CommandEnv()
	return cmd, nil
}

// Run runs name in the root (Command) and returns its combined output; the error names the command.
func (r Root) Run(ctx context.Context, mounts []Mount, name string, args ...string) (string, error) {
	cmd, err := r.Command(ctx, mounts, name, args...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in the trixie root: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// mountScript is the shell that mounts /proc, /sys, /dev (recursively: /dev/pts, /dev/net/tun, /dev/kvm
// come along) and the extra mounts inside dir.
func mountScript(dir string, mounts []Mount) string {
	in := func(p string) string { return shellQuote(filepath.Join(dir, p)) }
	var b strings.Builder
	b.WriteString("mount -t proc proc " + in("proc") + "\n")
	b.WriteString("mount --rbind /sys " + in("sys") + "\n")
	b.WriteString("mount --rbind /dev " + in("dev") + "\n")
	for _, m := range mounts {
		b.WriteString("[ -e " + in(m.Target) + " ] || mkdir -p " + in(m.Target) + "\n")
		if m.Source == "" {
			b.WriteString("mount -t tmpfs tmpfs " + in(m.Target) + "\n")
		} else {
			b.WriteString("mount --bind " + shellQuote(m.Source) + " " + in(m.Target) + "\n")
		}
	}
	return b.String()
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
