package controlplane_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// webhookName is the MutatingWebhookConfiguration of manifests/webhook and its one webhook: the name a refused
// pod's message carries.
const webhookName = "sriov-udn-binding-podinfo.kubevirt.io"

// webhookServer is `sriov-udn-binding webhook` running as a child process, with its log lines.
type webhookServer struct {
	cmd    *exec.Cmd
	addr   string
	done   chan error
	mu     sync.Mutex
	lines  []string
	stderr string // path of the full log
}

// startWebhook runs `bin webhook` on a free port of 127.0.0.1 with the key pair in dir, and returns once it
// logged the address it serves on.
func startWebhook(t *testing.T, bin, dir string) *webhookServer {
	t.Helper()
	w := &webhookServer{done: make(chan error, 1), stderr: filepath.Join(dir, "webhook.log")}
	w.cmd = exec.Command(bin, "webhook", "--listen=127.0.0.1:0",
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"), "--tls-key-file="+filepath.Join(dir, "tls.key"))
	pipe, err := w.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	logFile, err := os.Create(w.stderr)
	require.NoError(t, err)
	serving := make(chan string, 1)
	go func() {
		defer logFile.Close()
		scanner := bufio.NewScanner(pipe)
		for scanner.Scan() {
			line := scanner.Text()
			fmt.Fprintln(logFile, line)
			w.mu.Lock()
			w.lines = append(w.lines, line)
			w.mu.Unlock()
			var entry struct{ Msg, Address string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "webhook serving" {
				serving <- entry.Address
			}
		}
		w.done <- w.cmd.Wait()
	}()
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	})
	select {
	case w.addr = <-serving:
	case err := <-w.done:
		require.Failf(t, "the webhook exited before serving", "%v; its log:\n%s", err, tail(w.stderr, 20))
	case <-time.After(30 * time.Second):
		require.Failf(t, "the webhook did not serve within 30 s", "its log:\n%s", tail(w.stderr, 20))
	}
	return w
}

// reviews returns the "admission review" lines the webhook logged so far.
func (w *webhookServer) reviews() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	for _, line := range w.lines {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == "admission review" {
			out = append(out, entry)
		}
	}
	return out
}

// stop sends SIGTERM and requires a clean exit.
func (w *webhookServer) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-w.done:
		require.NoError(t, err, "the webhook's exit on SIGTERM; its log:\n%s", tail(w.stderr, 20))
	case <-time.After(30 * time.Second):
		require.Fail(t, "the webhook did not stop within 30 s of SIGTERM")
	}
}

// webhookKubeVirt is the KubeVirt CR with the binding registered as manifests/kubevirt/device-info does.
func webhookKubeVirt(t *testing.T) *kubevirtv1.KubeVirt {
	t.Helper()
	kv := &kubevirtv1.KubeVirt{}
	require.NoError(t, json.Unmarshal([]byte(baseKubeVirt), kv))
	kv.Spec.Configuration.NetworkConfiguration = &kubevirtv1.NetworkConfiguration{Binding: map[string]kubevirtv1.InterfaceBindingPlugin{
		bindingName: {
			SidecarImage:            "ghcr.io/sriov-udn-binding/sriov-udn-binding:v0.1.0",
			DownwardAPI:             kubevirtv1.DeviceInfo,
			ComputeResourceOverhead: &kubevirtv1.ResourceRequirementsWithoutClaims{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		},
	}}
	return kv
}

// TestPodInfoWebhookWithoutMAP: on a kube-apiserver that does not serve MutatingAdmissionPolicy (1.34 at its
// defaults, as OpenShift 4.19-4.21 and any 1.34/1.35 without the gate), manifests/overlays/webhook applies, and
// the webhook (the sidecar binary's `webhook` subcommand) gives the launcher pod KubeVirt renders exactly the
// pod-info volume and mount the MutatingAdmissionPolicy gives (launcher_test.go), leaves other pods alone, adds
// nothing on a second pass, and, when it is down, the pod is refused with the webhook's name.
func TestPodInfoWebhookWithoutMAP(t *testing.T) {
	k := kubeVersions[0]
	require.Equal(t, "1.34", k.minor)
	if !slices.ContainsFunc(selectedKubeVersions(t), func(s kubeVersion) bool { return s.name == k.name }) {
		t.Skipf("a Kubernetes %s server without MutatingAdmissionPolicy: %s=%q leaves %s out (make test runs it in its main lane)",
			k.name, kubeVersionsEnv, os.Getenv(kubeVersionsEnv), k.name)
	}
	k.flags = func(*testing.T) []string { return nil } // no MutatingAdmissionPolicy gate, no v1beta1
	// The sidecar binary (the repository's root module) builds while the server starts.
	sidecarBin := filepath.Join(t.TempDir(), "sriov-udn-binding")
	built := make(chan error, 1)
	go func() {
		cmd := exec.Command("go", "build", "-o", sidecarBin, "./cmd/sidecar")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			built <- fmt.Errorf("go build ./cmd/sidecar: %w\n%s", err, out)
			return
		}
		built <- nil
	}()
	c := startControlPlane(t, k)
	installCRDs(t, c)
	kubectl := newKubectl(t, c.config)
	ctx := t.Context()

	// No version of the API is served: that is the case this entry point is for.
	for _, v := range []string{"v1", "v1beta1", "v1alpha1"} {
		resources, err := c.kube.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/" + v)
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err, "discovery of admissionregistration.k8s.io/%s", v)
		for _, r := range resources.APIResources {
			require.NotEqual(t, "mutatingadmissionpolicies", r.Name, "admissionregistration.k8s.io/%s serves MutatingAdmissionPolicy", v)
		}
	}

	// The workload namespace with its NADs (the template service reads them) and its default ServiceAccount.
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vmNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, nad := range []string{"nad-layer2.yaml", "nad-localnet.yaml"} {
		obj := loadUnstructured(t, filepath.Join(manifestsDir, "examples", nad))
		_, err := c.dynamic.Resource(nadGVR).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err, "%s", nad)
	}
	_, err = c.kube.CoreV1().ServiceAccounts(vmNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The launcher pods KubeVirt renders: for a VMI with our binding, and for one without any.
	kv := webhookKubeVirt(t)
	ourImage := kv.Spec.Configuration.NetworkConfiguration.Binding[bindingName].SidecarImage
	// virt-controller renders a created VMI: the pod's ownerReference needs its uid.
	vmiOf := func(u *unstructured.Unstructured) *kubevirtv1.VirtualMachineInstance {
		vmi := toVMI(t, u)
		vmi.UID = types.UID(uuid.NewString())
		return vmi
	}
	ours := c.renderLauncherPod(t, kv, vmiOf(vmiFrom(t, exampleVM(t))))
	ourSidecar := sidecarRunning(t, ours, ourImage)
	plain := vmiFrom(t, exampleVM(t))
	withBinding(t, plain, "")
	notOurs := c.renderLauncherPod(t, kv, vmiOf(plain))
	notAHookSidecar := notOurs.DeepCopy()
	notAHookSidecar.Spec.Containers = append(notAHookSidecar.Spec.Containers, corev1.Container{Name: "not-a-hook-sidecar", Image: ourImage})
	// What the server makes of each with no admission of ours: the baseline.
	baseline := map[string]*corev1.Pod{}
	for name, pod := range map[string]*corev1.Pod{"ours": ours, "not ours": notOurs, "not a hook sidecar": notAHookSidecar} {
		baseline[name] = decided(c.createPod(t, pod, true))
		require.False(t, podInfoMounted(baseline[name]), name)
	}

	// The entry point applies on this server: no object of a kind it does not serve.
	entry := filepath.Join(manifestsDir, "overlays", "webhook")
	out, err := kubectl.applyKustomize(entry)
	require.NoError(t, err, "kubectl apply -k %s: %s", entry, out)
	c.assertAllStored(t, kustomizeBuild(t, entry))

	// The webhook served by the sidecar binary, its Service replaced by a URL to it (no kubelet runs it here).
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600))
	require.NoError(t, <-built)
	server := startWebhook(t, sidecarBin, dir)
	mwcs := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	mwc, err := mwcs.Get(ctx, webhookName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, mwc.Webhooks, 1)
	require.NotNil(t, mwc.Webhooks[0].ClientConfig.Service, "as shipped, the webhook is reached through its Service")
	mwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + server.addr + "/mutate"), CABundle: certPEM}
	_, err = mwcs.Update(ctx, mwc, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The configuration reaches the admission plugin through an informer: wait for its effect.
	c.waitForMutation(t, ours, true)

	t.Run("the launcher pod gets the MutatingAdmissionPolicy's volume and mount, and nothing else", func(t *testing.T) {
		created := decided(c.createPod(t, ours, false))
		rest, volume, mounts := withoutPodInfo(t, created, ourSidecar)
		assert.Equal(t, baseline["ours"], rest, "the pod apart from the pod-info volume and mount")
		// As testLauncherPod expects of the MutatingAdmissionPolicy, field by field.
		assertPodInfoAdded(t, created, ourSidecar, volume, mounts)
	})
	t.Run("a pod already mutated (a reinvocation) gains nothing", func(t *testing.T) {
		first := decided(c.createPod(t, ours, false))
		remade := first.DeepCopy()
		remade.GenerateName = ours.GenerateName
		before := len(server.reviews())
		assert.Equal(t, first, decided(c.createPod(t, remade, false)))
		reviews := server.reviews()
		require.Len(t, reviews, before+1, "the webhook was called once for it")
		assert.EqualValues(t, 0, reviews[len(reviews)-1]["patchOps"], "and answered with no patch")
		assert.Equal(t, true, reviews[len(reviews)-1]["allowed"])
	})
	t.Run("pods not ours are untouched, and the webhook is not called for them", func(t *testing.T) {
		before := len(server.reviews())
		for _, name := range []string{"not ours", "not a hook sidecar"} {
			pod := map[string]*corev1.Pod{"not ours": notOurs, "not a hook sidecar": notAHookSidecar}[name]
			assert.Equal(t, baseline[name], decided(c.createPod(t, pod, false)), name)
		}
		assert.Len(t, server.reviews(), before, "matchConditions keep these pods from the webhook")
	})

	// Down: a launcher pod with our sidecar is refused, naming the webhook; other pods are created.
	server.stop(t)
	t.Run("with the webhook down, our launcher pod is refused naming it, other pods are not", func(t *testing.T) {
		_, err := c.kube.CoreV1().Pods(ours.Namespace).Create(ctx, ours, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `failed calling webhook "`+webhookName+`"`)
		t.Logf("the refusal: %v", err)
		c.createPod(t, notOurs, true)
		c.createPod(t, notAHookSidecar, true)
	})
	t.Run("with the webhook down and failurePolicy Ignore, manifests/policy still refuses the pod", func(t *testing.T) {
		mwc, err := mwcs.Get(ctx, webhookName, metav1.GetOptions{})
		require.NoError(t, err)
		mwc.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		_, err = mwcs.Update(ctx, mwc, metav1.UpdateOptions{})
		require.NoError(t, err)
		var last error
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, last = c.kube.CoreV1().Pods(ours.Namespace).Create(ctx, ours, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return last != nil && strings.Contains(last.Error(), "'"+podInfoMountedPolicy+"'"), nil
		})
		require.NoError(t, err, "never refused by %s: %v", podInfoMountedPolicy, last)
		assert.Contains(t, strings.Join(strings.Fields(last.Error()), " "), "the sriov-udn-binding sidecar "+ourSidecar+" has no pod-info volume")
	})
	t.Run("overlays/hco-webhook applies on this server too", func(t *testing.T) {
		// The test pointed the webhook at a URL, which kubectl's three-way merge would add the Service to: back to
		// the configuration as shipped first.
		require.NoError(t, mwcs.Delete(ctx, webhookName, metav1.DeleteOptions{}))
		dir := filepath.Join(manifestsDir, "overlays", "hco-webhook")
		out, err := kubectl.applyKustomize(dir)
		require.NoError(t, err, "kubectl apply -k %s: %s", dir, out)
		c.assertAllStored(t, kustomizeBuild(t, dir))
	})
	t.Run("docs/install.md's uninstall leaves nothing of the webhook entry points", func(t *testing.T) {
		testWebhookUninstall(t, c)
	})
}

// testWebhookUninstall runs docs/install.md's uninstall block on a server without MutatingAdmissionPolicy, after
// overlays/webhook and overlays/hco-webhook were applied, with what the page says to leave out there (the
// MutatingAdmissionPolicy kinds; the Plugin line), no examples (none were applied) and no KubeVirt CR to patch
// (this server has none; testUninstall checks that line). Our namespace is deleted
// without waiting: its finalizer is kube-controller-manager's, which does not run here, so it stays Terminating.
func testWebhookUninstall(t *testing.T, c *cluster) {
	ctx := t.Context()
	var lines []string
	for _, b := range markedBlocks(t, filepath.Join("docs", "install.md"), markControlPlane+"-uninstall") {
		for _, l := range strings.Split(b.text, "\n") {
			switch {
			case strings.Contains(l, "manifests/examples/"), strings.Contains(l, "plugins.plugin.kubevirt.io"),
				strings.HasPrefix(l, "kubectl delete mutatingadmissionpolicybindings,mutatingadmissionpolicies"),
				strings.HasPrefix(l, "kubectl -n kubevirt patch kubevirt"): // no KubeVirt CR on this server: testUninstall covers it
				continue
			case strings.HasPrefix(l, "kubectl delete namespaces"):
				l += " --wait=false"
			case strings.HasPrefix(l, "kubectl get "):
				l = strings.Replace(l, "mutatingadmissionpolicies,mutatingadmissionpolicybindings,", "", 1)
			}
			lines = append(lines, l)
		}
	}
	b := shellBlock{file: "docs/install.md (uninstall, no MutatingAdmissionPolicy)", text: strings.Join(lines, "\n")}
	out, err := runBlock(t, t.TempDir(), b, c.docEnv(t))
	require.NoError(t, err, "%s\noutput:\n%s", b.text, out)

	gvr := func(group, version, resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
	}
	for _, r := range []schema.GroupVersionResource{
		gvr("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
		gvr("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"),
		gvr("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"),
		gvr("apps", "v1", "deployments"),
		gvr("policy", "v1", "poddisruptionbudgets"),
		gvr("", "v1", "services"),
		gvr("", "v1", "serviceaccounts"),
		gvr("", "v1", "configmaps"),
		gvr("", "v1", "namespaces"),
	} {
		list, err := c.dynamic.Resource(r).List(ctx, metav1.ListOptions{LabelSelector: ourLabel})
		require.NoError(t, err, "%s", r)
		for _, o := range list.Items {
			if r.Resource == "namespaces" && o.GetDeletionTimestamp() != nil {
				continue // Terminating: the namespace controller would finish it
			}
			t.Errorf("%s %s/%s is left after the uninstall", r.Resource, o.GetNamespace(), o.GetName())
		}
	}
}
