package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// apiserverOutage is how long kube-apiserver stays down in the fault scenario.
const apiserverOutage = 60 * time.Second

// faultsUnderTheRunningVM runs the node's faults against run's VM, in turn, each asserted on the real objects
// and on the guest: virt-handler's pod deleted while the guest's VF loses its addresses, kubelet, containerd
// and kube-apiserver restarted, our sidecar killed; then the VM's next VMI starts on the faulted node.
func faultsUnderTheRunningVM(ctx context.Context, t *testing.T, e *env, run *guestRun) {
	w := watchVMI(ctx, t, e, guestVM)
	v4, v6 := run.net.addrs()
	keeps := func(vmi *kubevirtv1.VirtualMachineInstance) error {
		st := statusOf(vmi, "udn-vf")
		if got := ipsOf(st, true); !slices.Equal(got, v4) {
			return fmt.Errorf("udn-vf's IPv4 %v, want %v", got, v4)
		}
		if got := globalIPs(st, false); !isSubset(v6, got) {
			return fmt.Errorf("udn-vf's IPv6 %v, want %v among them", got, v6)
		}
		return nil
	}

	if !t.Run("fault: virt-handler's pod deleted, the guest's VF unaddressed before its successor runs: the patched handler's first status keeps udn-vf's IPs", func(t *testing.T) {
		t.Cleanup(func() {
			assert.NoError(t, e.node.UseVirtHandler(ctx, VirtHandlerStockImage), "KubeVirt: back to the stock virt-handler")
		})
		from := w.mark()
		require.NoError(t, e.node.RestartVirtHandler(ctx, VirtHandlerPatchedImage, func() error { return flap(ctx, e, run, noAddress) }),
			"KubeVirt: virt-handler deleted, the guest flapped with none running, then virt-handler (patches/kubevirt)")
		_, _, err := w.until(ctx, from, "status: the new virt-handler's report of the flap", 5*time.Minute, reported(true))
		require.NoError(t, err)
		checkGuestVF(ctx, t, e, run, noAddress)
		for _, vmi := range w.since(from) {
			assert.NoError(t, keeps(vmi), "status at resourceVersion %s", vmi.ResourceVersion)
		}
		from = w.mark()
		require.NoError(t, unflap(ctx, e, run))
		_, _, err = w.until(ctx, from, "status: the guest agent's report of the restore", 5*time.Minute, reported(false))
		require.NoError(t, err)
		untouched(ctx, t, e, run, "")
	}) {
		return
	}

	if !t.Run("fault: kubelet, containerd and kube-apiserver (60 s down) restarted: the VM runs, and a later annotation still reaches our watcher and cache entry", func(t *testing.T) {
		for _, c := range []struct {
			component Component
			outage    time.Duration
		}{{Kubelet, 0}, {Containerd, 0}, {KubeAPIServer, apiserverOutage}} {
			require.NoError(t, e.node.Restart(ctx, c.component, c.outage), "node: %s restarted", c.component)
			// Serving again is not yet serving the pod: a restarted kubelet knows the pod only once it has read it
			// from the apiserver (before that, an exec answers "pod does not exist").
			require.NoError(t, e.node.pollFor(ctx, "an exec into the launcher pod after "+string(c.component)+"'s restart", 2*time.Minute, time.Second, nil, func() error {
				_, err := guestOutput(ctx, e, run, "true")
				return err
			}))
			untouched(ctx, t, e, run, "")
		}
		// Our cache entry goes, then the pod gets an annotation: the restarted kubelet projects it into pod-info,
		// our watcher reads it, and the cache sync that follows writes the entry again, as it was.
		entry := cacheEntry(t, e, run, "udn-vf")
		before, err := os.ReadFile(entry)
		require.NoError(t, err, "cluster: our cache entry of udn-vf")
		writes := func() int {
			logs, err := e.node.Kube().Run(ctx, nil, "logs", run.pod.Name, "-c", run.sidecar)
			require.NoError(t, err)
			return strings.Count(string(logs), `"msg":"interface cache entry written"`)
		}
		written := writes()
		require.NoError(t, os.Remove(entry))
		stamp := time.Now().UTC().Format(time.RFC3339Nano)
		_, err = e.node.Kube().Run(ctx, nil, "annotate", "pod", run.pod.Name, "--overwrite", "cluster.sriov-udn.test/after-restarts="+stamp)
		require.NoError(t, err)
		// The log line follows the rename, and reaches the log file through containerd: both are awaited.
		require.NoError(t, e.node.pollFor(ctx, "our cache entry of udn-vf written again, and logged", 2*time.Minute, time.Second, nil, func() error {
			if _, err := os.Stat(entry); err != nil {
				return err
			}
			if n := writes(); n != written+1 {
				return fmt.Errorf("%d %q lines in our log, want %d", n, "interface cache entry written", written+1)
			}
			return nil
		}))
		after, err := os.ReadFile(entry)
		require.NoError(t, err)
		assert.JSONEq(t, string(before), string(after), "our cache entry, rewritten as it was")
	}) {
		return
	}

	t.Run("fault: our sidecar killed (SIGKILL) while the VM runs: the VM keeps running and its address; its next VMI starts", func(t *testing.T) {
		pod, err := e.client.CoreV1().Pods("default").Get(ctx, run.pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		id := containerID(pod, run.sidecar)
		require.NotEmpty(t, id, "KubeVirt: our sidecar's container status")
		require.NoError(t, e.node.KillContainer(id))
		require.NoError(t, e.node.pollFor(ctx, "kubelet: our sidecar terminated", 2*time.Minute, time.Second, nil, func() error {
			pod, err := e.client.CoreV1().Pods("default").Get(ctx, run.pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == run.sidecar && cs.State.Terminated != nil {
					assert.Equal(t, int32(137), cs.State.Terminated.ExitCode, "our sidecar ended by SIGKILL")
					return nil
				}
			}
			return fmt.Errorf("our sidecar not terminated: %+v", pod.Status.ContainerStatuses)
		}))
		untouched(ctx, t, e, run, run.sidecar)
		vmi, err := vmiNow(ctx, e, guestVM)
		require.NoError(t, err)
		assert.Equal(t, v4, ipsOf(statusOf(vmi, "udn-vf"), true), "status: udn-vf's IPv4 with our sidecar gone")

		// The VMI stops with our sidecar gone (virt-launcher's Shutdown hook call is refused), and the VM's next
		// VMI starts on this node after every fault above, its guest configured from our sidecar's answer.
		_, err = e.node.Kube().Run(ctx, nil, "delete", "vmi", guestVM, "--wait=true", "--timeout=3m")
		require.NoError(t, err, "KubeVirt: the VMI deleted with our sidecar dead")
		next := awaitGuest(ctx, t, e, guestVM, string(run.vmi.UID), time.Now(), true)
		checkGuestNetwork(t, next)
	})
}

// untouched asserts that run's VM runs on, as it ran: the same VMI Running, the same pod Running with each of
// its containers (but dead, which may have ended) the one that ran at the start, its processes alive (read from
// its cgroup: the pod's status may lag), and the guest's VF configured. No container of a launcher pod exits by
// design, and none is restarted (restartPolicy Never): a container that ended shows as terminated.
func untouched(ctx context.Context, t *testing.T, e *env, run *guestRun, dead string) {
	t.Helper()
	vmi, err := vmiNow(ctx, e, guestVM)
	require.NoError(t, err)
	assert.Equal(t, run.vmi.UID, vmi.UID, "KubeVirt: the same VMI")
	assert.Equal(t, kubevirtv1.Running, vmi.Status.Phase, "KubeVirt: the VMI Running")
	pod, err := e.client.CoreV1().Pods("default").Get(ctx, run.pod.Name, metav1.GetOptions{})
	require.NoError(t, err, "the launcher pod")
	assert.Equal(t, run.pod.UID, pod.UID, "the same launcher pod")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase, "the launcher pod Running")
	for _, cs := range run.pod.Status.ContainerStatuses {
		if cs.Name == dead {
			continue
		}
		id := containerID(pod, cs.Name)
		assert.Equal(t, containerID(run.pod, cs.Name), id, "container %s: the one that ran at the start", cs.Name)
		assert.NoError(t, e.node.ContainerAlive(id), "container %s", cs.Name)
	}
	checkGuestVF(ctx, t, e, run, "")
}

// cacheEntry is our sidecar's interface cache entry of iface for run's VMI, as the host sees it: in the launcher
// pod's hooks emptyDir, under the sub-directory KubeVirt mounts into our container (its name) as
// /var/run/kubevirt-hooks, at ifacecache/<vmi-uid>/<iface> (cmd/sidecar --iface-cache-dir).
func cacheEntry(t *testing.T, e *env, run *guestRun, iface string) string {
	t.Helper()
	p := filepath.Join(e.node.PodVolumes(string(run.pod.UID)), "kubernetes.io~empty-dir", "hook-sidecar-sockets", run.sidecar, "ifacecache",
		string(run.vmi.UID), iface)
	_, err := os.Stat(p)
	require.NoError(t, err, "cluster: our cache entry of %s", iface)
	return p
}

// containerID is the runtime's ID of pod's container name (its status's containerID without "containerd://").
func containerID(pod *corev1.Pod, name string) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			return id
		}
	}
	return ""
}

// isSubset says whether every element of sub is in of.
func isSubset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

// Our sidecar killed (SIGKILL) once it has answered virt-launcher's Info call and before PreCloudInitIso, the
// first call that carries the VM's data (pkg/virt-launcher/virtwrap/manager.go calls it before it defines the
// domain). KubeVirt's own outcome, as v1.8.4 has it, depends on whether virt-controller saw our container running
// before the kill (a hook sidecar has no readiness probe: running is ready):
//   - it did not: the launcher pod never becomes ready, and the VMI stays in Scheduling with no event, since
//     virt-controller fails a scheduling VMI only when the pod fails or its compute container ends
//     (pkg/controller/controller.go IsPodFailedOrGoingDown, pkg/virt-controller/watch/vmi/lifecycle.go);
//   - it did: the VMI is Scheduled, and virt-handler's syncs fail, each with an event that names PreCloudInitIso.
//
// Either way the VMI never runs, the pod names our container as ended by SIGKILL (exit 137) and nothing else in it
// ended, and deleting the VMI clears it. The VMI has no root disk: nothing needs to boot.
func TestVMI_SidecarKilledBeforePreCloudInitIso_TheVMINeverRuns(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	const name = "vm-killed"
	vmi := strings.NewReplacer("name: vm-bad", "name: "+name, ", labels: {cluster.sriov-udn.test/network-status: malformed}", "").Replace(badVMIYAML)
	require.NotContains(t, vmi, "malformed")
	require.NoError(t, e.node.waitFor(ctx, "the VMI accepted", 2*time.Minute, nil, func() error {
		_, err := e.node.Kube().Run(ctx, []byte(vmi), "apply", "-f", "-")
		return err
	}))
	t.Cleanup(func() { _, _ = e.node.Kube().Run(ctx, nil, "delete", "vmi", name, "--wait=false") })
	w := watchVMI(ctx, t, e, name)

	var pod corev1.Pod
	var sidecar string
	require.NoError(t, e.node.pollFor(ctx, name+"'s launcher pod", 4*time.Minute, 100*time.Millisecond, nil, func() error {
		pods, err := e.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "vm.kubevirt.io/name=" + name})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d launcher pods", len(pods.Items))
		}
		pod = pods.Items[0]
		for _, c := range pod.Spec.Containers {
			if c.Image == SidecarImage {
				sidecar = c.Name
				return nil
			}
		}
		return fmt.Errorf("no container runs %s", SidecarImage)
	}))
	// Its log as kubelet writes it, and its process, read from the host: the pod's status and a kubectl round trip
	// are slower than the seconds between virt-launcher's Info and PreCloudInitIso calls.
	logFile := e.node.ContainerLog(&pod, sidecar)
	require.NoError(t, e.node.pollFor(ctx, "our sidecar's answer to Info", 3*time.Minute, 20*time.Millisecond, nil, func() error {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `"hook":"Info"`) {
			return fmt.Errorf("no Info call in its log yet")
		}
		return nil
	}))
	id, err := e.node.ContainerOf(string(pod.UID), sidecarProgram)
	require.NoError(t, err)
	require.NoError(t, e.node.KillContainer(id))

	require.NoError(t, e.node.pollFor(ctx, "kubelet: our sidecar ended", 2*time.Minute, time.Second, nil, func() error {
		p, err := e.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == sidecar && cs.State.Terminated != nil {
				pod = *p
				return nil
			}
		}
		return fmt.Errorf("our sidecar's status: %+v", p.Status.ContainerStatuses)
	}))
	// The container has ended, so containerd has written all it logged: a PreCloudInitIso answered before the kill
	// would be there.
	logged, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.NotContains(t, string(logged), `"hook":"PreCloudInitIso"`, "the kill came after PreCloudInitIso: this run tests nothing")
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sidecar {
			assert.Equal(t, int32(137), cs.State.Terminated.ExitCode, "the pod: our sidecar ended by SIGKILL")
			continue
		}
		assert.Nil(t, cs.State.Terminated, "the pod: container %s not ended", cs.Name)
	}

	got, err := vmiNow(ctx, e, name)
	require.NoError(t, err)
	switch got.Status.Phase {
	case kubevirtv1.Scheduling:
		t.Logf("KubeVirt: %s stays in Scheduling (virt-controller did not see our container running)", name)
	case kubevirtv1.Scheduled:
		var message string
		require.NoError(t, e.node.pollFor(ctx, "an event of "+name+" naming PreCloudInitIso", 3*time.Minute, time.Second, nil, func() (err error) {
			message, err = eventNaming(ctx, e, name, "PreCloudInitIso")
			return err
		}))
		t.Logf("KubeVirt: %s Scheduled, its syncs fail: %s", name, message)
	default:
		t.Errorf("KubeVirt: %s is %s, neither Scheduling nor Scheduled", name, got.Status.Phase)
	}
	for _, st := range w.since(0) {
		assert.NotEqual(t, kubevirtv1.Running, st.Status.Phase, "KubeVirt: %s never runs (resourceVersion %s)", name, st.ResourceVersion)
	}
	_, err = e.node.Kube().Run(ctx, nil, "delete", "vmi", name, "--wait=true", "--timeout=2m")
	require.NoError(t, err, "KubeVirt: the VMI deleted")
}
