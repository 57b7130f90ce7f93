package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Component is one of the node's programs that a fault scenario stops and starts again under running VMs.
type Component string

const (
	Kubelet       Component = "kubelet"
	KubeAPIServer Component = "kube-apiserver"
	Containerd    Component = "containerd"
)

// exe is c's program as the host sees it.
func (n *Node) exe(c Component) string {
	if c == Containerd {
		return filepath.Join(n.root, "usr", "bin", "containerd")
	}
	return filepath.Join(n.bin, string(c))
}

// Restart stops c (SIGKILL, as a crash or the OOM killer ends it: kube-apiserver's graceful stop drains its
// watches for longer than a minute), waits until its process is gone, keeps it down for the outage (0: none),
// starts it again with the command line it ran with (its output in logs/<c>-restarted.log), and waits until it
// serves again: containerd's socket, kube-apiserver's /readyz, kubelet's /healthz. What runs on the node
// meanwhile (containerd's shims and their containers, the other components) is left alone.
func (n *Node) Restart(ctx context.Context, c Component, outage time.Duration) error {
	args, err := n.stop(ctx, c)
	if err != nil {
		return err
	}
	if outage > 0 {
		select { // the fault itself: c stays down this long
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(outage):
		}
	}
	if c == Containerd {
		// containerd finds its shim through PATH, which the node's init set for it (initScript).
		args = append([]string{"/usr/bin/env", "PATH=" + n.path("bin") + ":" + os.Getenv("PATH")}, args...)
	}
	if err := n.run(string(c)+"-restarted", args...); err != nil {
		return err
	}
	return n.waitFor(ctx, string(c)+" serving again", 2*time.Minute, nil, func() error { return n.serving(c) })
}

// stop ends c's process in this node (the one process of the node's PID namespace that runs c's program) and
// returns its command line.
func (n *Node) stop(ctx context.Context, c Component) ([]string, error) {
	exe, err := filepath.EvalSymlinks(n.exe(c))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	nodeNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", n.init.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("%s: the node's PID namespace: %w", c, err)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	var pids []int
	var args []string
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || p != exe {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || ns != nodeNS {
			continue // another node's, from the same cache
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		pids = append(pids, pid)
		args = strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	}
	if len(pids) != 1 {
		return nil, fmt.Errorf("%s: %d processes of the node run %s, want 1: %v", c, len(pids), exe, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("%s: SIGKILL to %d: %w", c, pids[0], err)
	}
	return args, n.waitFor(ctx, "the end of "+string(c), time.Minute, nil, func() error {
		if processAlive(pids[0]) {
			return fmt.Errorf("pid %d still runs", pids[0])
		}
		return nil
	})
}

// serving is nil once c answers as it does when up.
func (n *Node) serving(c Component) error {
	switch c {
	case Containerd:
		conn, err := net.Dial("unix", n.containerdSocket())
		if err != nil {
			return err
		}
		return conn.Close()
	case KubeAPIServer:
		return n.apiserverReady()
	case Kubelet:
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: n.Dial}}
		resp, err := client.Get("http://127.0.0.1:10248/healthz") // kubelet's default healthz port
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kubelet /healthz: %s", resp.Status)
		}
		return nil
	default:
		return fmt.Errorf("no readiness check for component %q", c)
	}
}

// KillContainer sends SIGKILL to every process of the container with the runtime's ID id, as the kernel's OOM
// killer or a crash would end it.
func (n *Node) KillContainer(id string) error {
	pids, err := containerProcs(id)
	if err != nil {
		return err
	}
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("container %s: cgroup.procs: %w", id, err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("container %s: SIGKILL to %d: %w", id, pid, err)
		}
	}
	return nil
}

// ContainerAlive is nil when the container with the runtime's ID id has a process.
func (n *Node) ContainerAlive(id string) error {
	_, err := containerProcs(id)
	return err
}

// containerProcs are the PIDs of the container with the runtime's ID id (its memory cgroup's cgroup.procs); none
// is an error.
func containerProcs(id string) ([]string, error) {
	dir, err := containerCgroup(id)
	if err != nil {
		return nil, err
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, err)
	}
	pids := strings.Fields(string(procs))
	if len(pids) == 0 {
		return nil, fmt.Errorf("container %s: no process in %s", id, dir)
	}
	return pids, nil
}

// PodVolumes is the directory of the pod's volumes (kubelet's pods/<uid>/volumes) as the host sees it.
func (n *Node) PodVolumes(podUID string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", n.init.Process.Pid), "var/lib/kubelet/pods", podUID, "volumes")
}

// ContainerLog is the log file kubelet writes of pod's container name (its first run), under the node's
// podLogsDir.
func (n *Node) ContainerLog(pod *corev1.Pod, name string) string {
	return n.path("podlogs", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), name, "0.log")
}

// sidecarProgram is our sidecar's program in its image (images/Containerfile ENTRYPOINT), as its processes'
// /proc/<pid>/exe name it.
const sidecarProgram = "/sriov-udn-binding"

// ContainerOf is the runtime's ID of the container of pod podUID whose process runs program (its path inside
// the container), found from the host's /proc: each process's cgroup path ends in pod<uid>/<container id>.
func (n *Node) ContainerOf(podUID, program string) (string, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return "", fmt.Errorf("the container of pod %s: %w", podUID, err)
	}
	for _, d := range procs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", d.Name(), "exe")); err != nil || exe != program {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(cg), "\n") {
			if _, after, ok := strings.Cut(line, "/pod"+podUID+"/"); ok && after != "" {
				return after, nil
			}
		}
	}
	return "", fmt.Errorf("no process of pod %s runs %s", podUID, program)
}
