package debroot

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// sbinDirs hold the system tools (debootstrap, mkfs.ext4, useradd, chroot, mount); a CI PATH may lack them.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin"}

// FindCommand is exec.LookPath that also looks in the sbin directories.
func FindCommand(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or %s", name, strings.Join(sbinDirs, ", "))
}

// CommandEnv is the environment with the sbin directories on PATH.
func CommandEnv() []string {
	path := os.Getenv("PATH")
	have := map[string]bool{}
	for _, d := range filepath.SplitList(path) {
		have[d] = true
	}
	for _, d := range sbinDirs {
		if !have[d] {
			path += string(filepath.ListSeparator) + d
		}
	}
	env := []string{"PATH=" + path}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// Run runs a command, its output going to logFile; on failure the error carries the log's tail.
func Run(ctx context.Context, logFile, name string, args ...string) error {
	bin, err := FindCommand(name)
	if err != nil {
		return err
	}
	f, err := os.Create(logFile)
	if err != nil {
		return fmt.Errorf("create %s: %w", logFile, err)
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = CommandEnv()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, Tail(logFile, 30))
	}
	return nil
}

// Tail returns the last lines of a file ("" when it cannot be read).
func Tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// CopyFile copies src to dst (created or truncated).
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

// UnmountUnder unmounts whatever is mounted inside dir (a failed debootstrap's proc, sys, dev), deepest
// first, so that dir can be removed.
func UnmountUnder(dir string) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	defer f.Close()
	var targets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			targets = append(targets, fields[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(targets)))
	for _, t := range targets {
		_ = syscall.Unmount(t, syscall.MNT_DETACH) // best effort: RemoveAll reports what is left
	}
}
