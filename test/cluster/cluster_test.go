package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// env is the one node of the package's tests; nil when the cluster is not run (skipReason says why).
type env struct {
	node   *Node
	client kubernetes.Interface
}

var (
	theEnv     *env
	skipReason string
)

// needNode returns the running node, or skips the test saying why there is none.
func needNode(t *testing.T) *env {
	t.Helper()
	if theEnv == nil {
		t.Skip(skipReason)
	}
	return theEnv
}

func TestMain(m *testing.M) {
	switch {
	case os.Getenv("SRIOV_UDN_CLUSTER") != "1":
		skipReason = "skipping the cluster: make test-cluster runs it (SRIOV_UDN_CLUSTER=1, root)"
		os.Exit(m.Run())
	case os.Geteuid() != 0:
		// Asked for and impossible: a run that skipped every test would pass, and say nothing of the cluster.
		logf("cluster: SRIOV_UDN_CLUSTER=1 needs root (namespaces, mounts, cgroups): run make test-cluster as root")
		os.Exit(1)
	case os.Getenv(upStateEnv) != "":
		os.Exit(keepUp(os.Getenv(upStateEnv)))
	}
	os.Exit(runWithNode(func(*env) int { return m.Run() }, true))
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// runWithNode brings the node up, runs body (the tests), runs docs/install.md's uninstall when body passed and
// uninstall is set, takes the node down and checks the host for leftovers: any fails the run.
func runWithNode(body func(*env) int, uninstallAfter bool) int {
	ctx := context.Background()
	t0 := time.Now()
	phase := func(what string) { logf("cluster: %-40s +%s", what, time.Since(t0).Round(100*time.Millisecond)) }
	before, err := ReadHostState("")
	if err != nil {
		logf("cluster: %v", err)
		return 1
	}
	images, err := os.MkdirTemp("", "sriov-udn-cluster-images-")
	if err != nil {
		logf("cluster (build): %v", err)
		return 1
	}
	defer os.RemoveAll(images)
	in, err := Prepare(ctx, harness.RepoRoot(), images, phase)
	if err != nil {
		logf("cluster (build): %v", err)
		return 1
	}

	node, err := Start(ctx, in.Paths, logf)
	code := 1
	defer func() {
		if code != 0 && node != nil {
			logf("cluster: logs kept in %s", node.Work)
		}
	}()
	if err == nil {
		phase("node up (etcd, containerd, control plane)")
		var e *env
		// Each step's phase is logged once it is done; the first error ends the sequence.
		for _, step := range []struct {
			done string
			run  func() error
		}{
			{"node Ready", func() (err error) { e, err = connect(ctx, node); return err }},
			{"NetworkAttachmentDefinition CRD", func() error { return applyNADCRD(ctx, node) }},
			{"KubeVirt Deployed", func() error { return deployKubeVirt(ctx, node, in.Operator) }},
			{"binding registered", func() error { return node.RegisterBinding(ctx, harness.RepoRoot()) }},
			{"KubeVirt CR kept", func() error { return keptCR(ctx, node) }},
		} {
			if err = step.run(); err != nil {
				break
			}
			phase(step.done)
		}
		if err == nil {
			theEnv = e
			code = body(e)
			phase("tests")
			if code == 0 && uninstallAfter {
				if err = uninstall(ctx, node); err != nil {
					code = 1
				} else {
					phase("uninstall: only our entry of the CR gone")
				}
			}
		}
	}
	if err != nil {
		logf("cluster (node): %v", err)
	}
	if node != nil {
		work := node.Work
		if serr := node.Stop(code != 0); serr != nil {
			logf("cluster (teardown): %v", serr)
			code = 1
		}
		after, herr := ReadHostState(work)
		if herr != nil {
			logf("cluster (teardown): %v", herr)
			return 1
		}
		if left := Leftovers(before, after); len(left) > 0 {
			logf("cluster (teardown): the host holds what the node left:\n  %s", strings.Join(left, "\n  "))
			return 1
		}
		phase("teardown, no leftover on the host")
	}
	return code
}

// keptCR checks that registering the binding left the rest of the KubeVirt CR, made by `kubectl apply`, as it was.
func keptCR(ctx context.Context, node *Node) error {
	out, err := node.Kube().Run(ctx, nil, "-n", "kubevirt", "get", "kubevirt", "kubevirt", "-o",
		`jsonpath={.spec.configuration.developerConfiguration.useEmulation} {.spec.configuration.developerConfiguration.featureGates} {.spec.infra.replicas} {.spec.configuration.network.binding.sriov-udn.sidecarImage} {.spec.configuration.network.binding.vf-standin.sidecarImage} {.spec.configuration.supportContainerResources[0].resources.limits.memory} {.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)
	if err != nil {
		return err
	}
	fields := strings.SplitN(string(out), " ", 7)
	if len(fields) < 7 || fields[6] == "" {
		return fmt.Errorf("KubeVirt CR: no last applied configuration, so not made as the test means: %q", out)
	}
	if got, want := strings.Join(fields[:6], " "), `true ["ReservedOverheadMemlock","HostDisk"] 1 `+SidecarImage+" "+VFStandInImage+" "+sidecarMemoryLimit; got != want {
		return fmt.Errorf("KubeVirt CR after registering the binding: useEmulation, featureGates, infra replicas, sidecar images, sidecar memory limit %q, want %q", got, want)
	}
	return nil
}

// uninstall runs docs/install.md's uninstall (Node.Uninstall) once the tests are done: nothing with our label is
// left, and the KubeVirt CR loses our entry and nothing else (the stand-in's binding, emulation, feature gates and
// infra stay).
func uninstall(ctx context.Context, node *Node) error {
	spec := func() (map[string]any, error) {
		out, err := node.Kube().Run(ctx, nil, "-n", "kubevirt", "get", "kubevirt", "kubevirt", "-o", "jsonpath={.spec}")
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			return nil, fmt.Errorf("KubeVirt CR spec: %w", err)
		}
		return m, nil
	}
	before, err := spec()
	if err != nil {
		return err
	}
	if err := node.Uninstall(ctx, harness.RepoRoot()); err != nil {
		return err
	}
	after, err := spec()
	if err != nil {
		return err
	}
	bindings := before
	for _, k := range []string{"configuration", "network", "binding"} {
		bindings, _ = bindings[k].(map[string]any)
	}
	if _, ok := bindings["sriov-udn"]; !ok {
		return fmt.Errorf("uninstall: the binding was not registered before it")
	}
	delete(bindings, "sriov-udn")
	if !reflect.DeepEqual(before, after) {
		return fmt.Errorf("uninstall: the KubeVirt CR lost more than our entry:\nwant %v\ngot  %v", before, after)
	}
	left, err := node.Kube().Run(ctx, nil, "get", "validatingadmissionpolicies,validatingadmissionpolicybindings,mutatingadmissionpolicies,mutatingadmissionpolicybindings,configmaps", "-A", "-l", OurLabel, "-o", "name")
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(left)); s != "" {
		return fmt.Errorf("uninstall: objects of ours are left:\n%s", s)
	}
	return nil
}

// applyNADCRD installs the NetworkAttachmentDefinition CRD, from the module that ships it (Multus installs the
// same one).
func applyNADCRD(ctx context.Context, node *Node) error {
	dir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", nadModule).Output()
	if err != nil {
		return fmt.Errorf("go list -m %s: %w", nadModule, err)
	}
	crd := filepath.Join(strings.TrimSpace(string(dir)), "artifacts", "networks-crd.yaml")
	if _, err := node.Kube().Run(ctx, nil, "apply", "-f", crd); err != nil {
		return fmt.Errorf("NAD CRD: %w", err)
	}
	_, err = node.Kube().Run(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/network-attachment-definitions.k8s.cni.cncf.io")
	return err
}

// nadModule ships the NetworkAttachmentDefinition CRD (artifacts/networks-crd.yaml).
const nadModule = "github.com/k8snetworkplumbingwg/network-attachment-definition-client"

// deployKubeVirt applies KubeVirt's operator and CR, as docs/install.md's reader would with kubectl, and waits
// for the CR's phase Deployed.
func deployKubeVirt(ctx context.Context, node *Node, operator string) error {
	if _, err := node.Kube().Run(ctx, nil, "apply", "--server-side", "-f", operator); err != nil {
		return fmt.Errorf("KubeVirt: %w", err)
	}
	// Made by `kubectl apply`, as many installs do: it carries a last-applied configuration, which a `kubectl
	// apply` of a partial KubeVirt would three-way merge with and drop every field ours has not. docs/install.md
	// registers with a merge patch, and keptCR checks that every field stays.
	if _, err := node.Kube().Run(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/kubevirts.kubevirt.io"); err != nil {
		return fmt.Errorf("KubeVirt CRD: %w", err)
	}
	if _, err := node.Kube().Run(ctx, []byte(KubeVirtCR), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("KubeVirt: %w", err)
	}
	return node.waitFor(ctx, "KubeVirt Deployed", 8*time.Minute, nil, func() error {
		out, err := node.Kube().Run(ctx, nil, "-n", "kubevirt", "get", "kubevirt", "kubevirt", "-o", "jsonpath={.status.phase}")
		if err != nil {
			return err
		}
		if string(out) != "Deployed" {
			return fmt.Errorf("phase %q", out)
		}
		return nil
	})
}

// connect makes the admin's client (through the node's network namespace) and waits for the node to be Ready.
func connect(ctx context.Context, node *Node) (*env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", node.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.Dial = node.Dial
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	err = node.waitFor(ctx, "node "+NodeName+" Ready", 2*time.Minute, nil, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready: %v", NodeName, n.Status.Conditions)
	})
	if err != nil {
		return nil, err
	}
	// kube-controller-manager makes each namespace's default ServiceAccount, without which no pod is admitted.
	if err := node.waitFor(ctx, "ServiceAccount default/default (kube-controller-manager)", time.Minute, nil, func() error {
		_, err := c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	// KubeVirt's operator schedules on control-plane nodes; kubelet may not set a node-role label itself.
	patch := []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`)
	if _, err := c.CoreV1().Nodes().Patch(ctx, NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("label node %s: %w", NodeName, err)
	}
	return &env{node: node, client: c}, nil
}

// On a live pod, through the real apiserver, the CNI stand-in writes the two annotations the sidecar reads, and
// they parse with the sidecar's own parsers: network-status with the VF network's device-info, pod-networks with
// the UDN's addresses.
func TestCNIStandIn_LivePodGetsNetworkStatusAndPodNetworks(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	nad := `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: udn-vf, namespace: default}
spec:
  config: '{"cniVersion": "1.0.0", "name": "udn-vf", "type": "sriov", "deviceID": "0000:65:00.2", "ipam": {"type": "host-local",
    "ranges": [[{"subnet": "192.168.50.0/24"}], [{"subnet": "fd50::/64"}]]}}'
`
	_, err := e.node.Kube().Run(ctx, []byte(nad), "apply", "-f", "-")
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cni-standin", Namespace: "default",
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": `[{"name": "udn-vf", "namespace": "default", "interface": "pod1234567890a"}]`}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "main", Image: PauseImage, ImagePullPolicy: corev1.PullNever}}},
	}
	_, err = e.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}) })
	var got *corev1.Pod
	require.NoError(t, e.node.waitFor(ctx, "pod cni-standin Running with its annotations", 2*time.Minute, nil, func() error {
		p, err := e.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Annotations["k8s.v1.cni.cncf.io/network-status"] == "" {
			return fmt.Errorf("phase %s, annotations %v", p.Status.Phase, maps.Keys(p.Annotations))
		}
		got = p
		return nil
	}))
	statuses, err := downwardapi.ParseNetworkStatus([]byte(got.Annotations["k8s.v1.cni.cncf.io/network-status"]))
	require.NoError(t, err)
	require.Len(t, statuses, 2, "the pod network and the VF network")
	vf := statuses[1]
	assert.Equal(t, "default/udn-vf", vf.Name)
	assert.Equal(t, "pod1234567890a", vf.Interface)
	require.NotNil(t, vf.DeviceInfo)
	require.NotNil(t, vf.DeviceInfo.Pci)
	assert.Equal(t, "0000:65:00.2", vf.DeviceInfo.Pci.PciAddress)
	assert.Len(t, vf.IPs, 2, "both families from host-local")
	snap := downwardapi.SnapshotFromMaps(got.Labels, got.Annotations)
	assert.Empty(t, snap.Problems, "the sidecar's parsers accept what the stand-in wrote")
	assert.Contains(t, got.Annotations["k8s.ovn.org/pod-networks"], `"default/udn-vf"`)
	assert.Len(t, got.Status.PodIPs, 2, "the pod network is dual-stack")
}

// KubeVirt's operator deployed KubeVirt from the images imported into containerd: no registry was asked.
func TestKubeVirt_DeployedFromTheImportedImages(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	pods, err := e.client.CoreV1().Pods("kubevirt").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	running := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			assert.True(t, strings.HasPrefix(c.Image, "localhost/kubevirt/"), "%s/%s runs %s", p.Name, c.Name, c.Image)
		}
		if p.Status.Phase == corev1.PodRunning {
			running[p.Labels["kubevirt.io"]] = true
		}
	}
	for _, c := range []string{"virt-operator", "virt-api", "virt-controller", "virt-handler"} {
		assert.True(t, running[c], "%s running", c)
	}
}

func TestNode_ReadyWithKubeletOfTheBuiltVersion(t *testing.T) {
	e := needNode(t)
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, kubernetesVersion, n.Status.NodeInfo.KubeletVersion)
	assert.Contains(t, n.Labels, "node-role.kubernetes.io/control-plane", "KubeVirt's operator schedules on control-plane nodes")
	var addr string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
		}
	}
	assert.Equal(t, nodeIP, addr)
}

// A pod runs from an image imported with ctr (no registry), and kubelet keeps its downwardAPI volume as it does
// for the pod-info volume of a virt-launcher pod: a tmpfs, files behind ..data, swapped atomically when the
// pod's annotations change.
func TestNode_PodDownwardAPIVolume_KubeletSwapsItOnAnnotate(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "podinfo", Namespace: "default", Labels: map[string]string{"app": "podinfo"},
			Annotations: map[string]string{"cluster.sriov-udn.test/phase": "one"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "main", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
				VolumeMounts: []corev1.VolumeMount{{Name: "podinfo", MountPath: "/podinfo"}}}},
			Volumes: []corev1.Volume{{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
				}}}}},
		},
	}
	created, err := e.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}) })
	require.NoError(t, e.node.waitFor(ctx, "pod podinfo Running", 2*time.Minute, nil, func() error {
		p, err := e.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s: %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	}))

	// The volume as the node's mount namespace holds it (its PID 1's root).
	vol := filepath.Join(fmt.Sprintf("/proc/%d/root", e.node.init.Process.Pid), "var/lib/kubelet/pods", string(created.UID),
		"volumes/kubernetes.io~downward-api/podinfo")
	data1, err := os.Readlink(filepath.Join(vol, "..data"))
	require.NoError(t, err, "kubelet's ..data link")
	ann, err := os.ReadFile(filepath.Join(vol, "annotations"))
	require.NoError(t, err)
	assert.Contains(t, string(ann), `cluster.sriov-udn.test/phase="one"`)

	patch := []byte(`{"metadata":{"annotations":{"cluster.sriov-udn.test/phase":"two"}}}`)
	_, err = e.client.CoreV1().Pods("default").Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, e.node.waitFor(ctx, "the annotation in the volume", time.Minute, nil, func() error {
		ann, err := os.ReadFile(filepath.Join(vol, "annotations"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(ann), `cluster.sriov-udn.test/phase="two"`) {
			return fmt.Errorf("annotations still %q", ann)
		}
		return nil
	}))
	data2, err := os.Readlink(filepath.Join(vol, "..data"))
	require.NoError(t, err)
	assert.NotEqual(t, data1, data2, "kubelet swapped ..data to a new timestamped directory")
}

// badVMIYAML is a VMI with a pod NIC (masquerade), one VF network bound to sriov-udn and the stand-in's own
// interface (bound to vf-standin, on a NAD of type none: it puts the stand-in after ours among the pod's
// sidecars). No disk: virt-launcher would call every hook, build the cloud-init ISO and start the domain, with
// nothing to boot, but the CNI stand-in truncates its network-status (the label). testdata/e2e holds the suite's VM.
const badVMIYAML = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: udn-vf, namespace: default}
spec:
  config: '{"cniVersion": "1.0.0", "name": "udn-vf", "type": "sriov", "deviceID": "0000:65:00.2", "ipam": {"type": "host-local",
    "ranges": [[{"subnet": "192.168.50.0/24"}], [{"subnet": "fd50::/64"}]]}}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: standin-none, namespace: default}
spec:
  config: '{"cniVersion": "1.0.0", "name": "standin-none", "type": "none"}'
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-bad, namespace: default, labels: {cluster.sriov-udn.test/network-status: malformed}}
spec:
  domain:
    resources: {requests: {memory: 128Mi}}
    devices:
      interfaces:
      - {name: default, masquerade: {}, macAddress: "02:00:00:00:00:0a"}
      - {name: udn-vf, binding: {name: sriov-udn}, macAddress: "02:00:00:aa:01:01"}
      - {name: standin, binding: {name: vf-standin}}
      disks:
      - {name: cloudinit, disk: {bus: virtio}}
  networks:
  - {name: default, pod: {}}
  - {name: udn-vf, multus: {networkName: udn-vf}}
  - {name: standin, multus: {networkName: standin-none}}
  volumes:
  - {name: cloudinit, cloudInitNoCloud: {userData: "#cloud-config\n"}}
`

// A malformed network-status on a live launcher pod (the CNI stand-in truncates it when the pod carries
// cluster.sriov-udn.test/network-status=malformed, a label KubeVirt copies from the VMI): the VM does not start,
// and the VMI's events carry our message, naming the annotation.
func TestVMI_MalformedNetworkStatus_VMFailsToStartWithOurMessage(t *testing.T) {
	e := needNode(t)
	ctx := context.Background()
	require.NoError(t, e.node.waitFor(ctx, "the VMI accepted", 2*time.Minute, nil, func() error {
		_, err := e.node.Kube().Run(ctx, []byte(badVMIYAML), "apply", "-f", "-")
		return err
	}))
	t.Cleanup(func() { _, _ = e.node.Kube().Run(ctx, nil, "delete", "vmi", "vm-bad", "--wait=false") })
	var message string
	require.NoError(t, e.node.waitFor(ctx, "an event of vm-bad naming network-status", 4*time.Minute, nil, func() error {
		phase, err := e.node.Kube().Run(ctx, nil, "get", "vmi", "vm-bad", "-o", "jsonpath={.status.phase}")
		if err != nil {
			return err
		}
		if string(phase) == "Running" {
			return fmt.Errorf("vm-bad is Running") // fails the wait only by timing out; checked below too
		}
		message, err = eventNaming(ctx, e, "vm-bad", "k8s.v1.cni.cncf.io/network-status")
		return err
	}))
	t.Logf("vm-bad's event: %s", message)
	// The parse error itself, not what a wait for data that never came says (which names the annotation too).
	assert.Contains(t, message, "invalid JSON", "the event names the parse error")
	phase, err := e.node.Kube().Run(ctx, nil, "get", "vmi", "vm-bad", "-o", "jsonpath={.status.phase}")
	require.NoError(t, err)
	assert.NotEqual(t, "Running", string(phase))

	// Nothing else is hurt: while vm-bad fails, a VMI without the binding starts and runs.
	require.NoError(t, e.node.waitFor(ctx, "the plain VMI accepted", 2*time.Minute, nil, func() error {
		_, err := e.node.Kube().Run(ctx, []byte(plainGuestVMI()), "apply", "-f", "-")
		return err
	}))
	t.Cleanup(func() {
		_, _ = e.node.Kube().Run(ctx, nil, "delete", "vmi", "vm-guest-plain", "--wait=true", "--timeout=3m")
	})
	require.NoError(t, e.node.pollFor(ctx, "KubeVirt: the plain VMI Running beside vm-bad", 4*time.Minute, time.Second, nil, func() error {
		out, err := e.node.Kube().Run(ctx, nil, "get", "vmi", "vm-guest-plain", "vm-bad", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}")
		if err != nil {
			return err
		}
		if !strings.Contains(string(out), "vm-guest-plain=Running") {
			return fmt.Errorf("phases: %s", out)
		}
		if strings.Contains(string(out), "vm-bad=Running") {
			return fmt.Errorf("vm-bad is Running: %s", out)
		}
		return nil
	}))
}
