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
	var v4, v6 []string
	for _, p := range run.net.Prefixes {
		if p.Addr().Is4() {
			v4 = append(v4, p.Addr().String())
		} else {
			v6 = append(v6, p.Addr().String())
		}
	}
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

	t.Run("fault: virt-handler's pod deleted, the guest's VF unaddressed meanwhile: the patched handler's first status keeps udn-vf's IPs", func(t *testing.T) {
		from := w.mark()
		require.NoError(t, e.node.RestartVirtHandler(ctx, VirtHandlerPatchedImage, func() error { return flap(ctx, e, run, noAddress) }),
			"KubeVirt: virt-handler (patches/kubevirt) deleted and recreated")
		t.Cleanup(func() {
			assert.NoError(t, e.node.UseVirtHandler(ctx, VirtHandlerStockImage), "KubeVirt: back to the stock virt-handler")
		})
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
	})

	t.Run("fault: kubelet, containerd and kube-apiserver (60 s down) restarted: the VM runs, and a later annotation still reaches our watcher and cache entry", func(t *testing.T) {
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
		require.NoError(t, e.node.pollFor(ctx, "our cache entry of udn-vf written again", 2*time.Minute, time.Second, nil, func() error {
			_, err := os.Stat(entry)
			return err
		}))
		after, err := os.ReadFile(entry)
		require.NoError(t, err)
		assert.JSONEq(t, string(before), string(after), "our cache entry, rewritten as it was")
		assert.Equal(t, written+1, writes(), "sidecar log: one more %q line, the rewrite", "interface cache entry written")
	})

	t.Run("fault: our sidecar killed (SIGKILL) while the VM runs: the VM keeps running and its address; its next VMI starts", func(t *testing.T) {
		pod, err := e.client.CoreV1().Pods("default").Get(ctx, run.pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		id := containerID(pod, run.sidecar)
		require.NotEmpty(t, id, "KubeVirt: our sidecar's container status")
		entry := cacheEntry(t, e, run, "udn-vf")
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
		_, err = os.Stat(entry)
		assert.NoError(t, err, "our cache entry stays for virt-handler")

		// The VMI stops with our sidecar gone (virt-launcher's Shutdown hook call finds no socket), and the VM's next
		// VMI starts on this node after every fault above, its guest configured from our sidecar's answer.
		_, err = e.node.Kube().Run(ctx, nil, "delete", "vmi", guestVM, "--wait=true", "--timeout=3m")
		require.NoError(t, err, "KubeVirt: the VMI deleted with our sidecar dead")
		next := awaitGuest(ctx, t, e, guestVM, string(run.vmi.UID), time.Now(), true)
		checkGuestNetwork(t, next)
	})
}

// untouched asserts that run's VM runs on, as it ran: the same VMI Running, the same pod Running with no container
// restarted or ended (but dead, which may have ended), and the guest's VF configured.
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
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == dead {
			continue
		}
		assert.Zero(t, cs.RestartCount, "container %s not restarted", cs.Name)
		// The containers that exit by design (the guest console's log tail goes on; nothing else exits).
		assert.NotNil(t, cs.State.Running, "container %s running: %+v", cs.Name, cs.State)
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
// domain). KubeVirt's own outcome, as v1.8.4 has it: the launcher pod never becomes ready, and virt-controller
// keeps the VMI in Scheduling with no event, since it fails a scheduling VMI only when the pod fails or its compute
// container ends (pkg/controller/controller.go IsPodFailedOrGoingDown, pkg/virt-controller/watch/vmi/lifecycle.go).
// What a user can see is asserted: the pod names our container as ended by SIGKILL (exit 137), nothing else in
// it ended or restarted, and deleting the VMI clears it. The VMI has no disk: nothing needs to boot.
func TestVMI_SidecarKilledBeforePreCloudInitIso_KubeVirtKeepsTheVMIScheduling(t *testing.T) {
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
	var logged string
	require.NoError(t, e.node.pollFor(ctx, "our sidecar's answer to Info", 3*time.Minute, 20*time.Millisecond, nil, func() error {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return err
		}
		if logged = string(b); !strings.Contains(logged, `"hook":"Info"`) {
			return fmt.Errorf("no Info call in its log yet")
		}
		return nil
	}))
	id, err := e.node.ContainerOf(string(pod.UID), sidecarProgram)
	require.NoError(t, err)
	require.NoError(t, e.node.KillContainer(id))
	after, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.NotContains(t, string(after), `"hook":"PreCloudInitIso"`, "the kill came after PreCloudInitIso: this run tests nothing")

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
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sidecar {
			assert.Equal(t, int32(137), cs.State.Terminated.ExitCode, "the pod: our sidecar ended by SIGKILL")
			continue
		}
		assert.Zero(t, cs.RestartCount, "the pod: container %s not restarted", cs.Name)
		assert.Nil(t, cs.State.Terminated, "the pod: container %s not ended", cs.Name)
	}
	got, err := vmiNow(ctx, e, name)
	require.NoError(t, err)
	assert.Equal(t, kubevirtv1.Scheduling, got.Status.Phase, "KubeVirt v1.8.4: the VMI stays in Scheduling")
	_, err = e.node.Kube().Run(ctx, nil, "delete", "vmi", name, "--wait=true", "--timeout=2m")
	require.NoError(t, err, "KubeVirt: the VMI deleted")
}
