package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/client-go/kubecli"
	"kubevirt.io/kubevirt/pkg/defaults"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/network/netbinding"
	netannotations "kubevirt.io/kubevirt/pkg/network/pod/annotations"
	netresources "kubevirt.io/kubevirt/pkg/network/resources"
	storageannotations "kubevirt.io/kubevirt/pkg/storage/pod/annotations"
	"kubevirt.io/kubevirt/pkg/testutils"
	"kubevirt.io/kubevirt/pkg/virt-controller/services"
)

const (
	// podInfoDir is cmd/sidecar's default --pod-info-dir: the MutatingAdmissionPolicy must mount there.
	podInfoDir    = "/var/run/kubevirt-private/downwardapi/podinfo"
	podInfoVolume = "sriov-udn-podinfo"
)

// kubevirtTag is the KubeVirt release this module renders with, for the images of its pods: the matrix's
// KUBEVIRT_VERSION (make test-controlplane sets it with the -modfile it passes), else test/go.mod's. Test
// binaries carry no dependency versions in their build info, hence the files.
func kubevirtTag(t *testing.T) string {
	t.Helper()
	if v := os.Getenv("KUBEVIRT_VERSION"); v != "" {
		return v
	}
	data, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*kubevirt\.io/kubevirt (v\S+)$`).FindSubmatch(data)
	require.NotNil(t, m, "test/go.mod requires no kubevirt.io/kubevirt")
	return string(m[1])
}

// renderLauncherPod renders the virt-launcher pod of vmi the way virt-controller does: KubeVirt's
// TemplateService with the options pkg/virt-controller/watch/application.go gives it, a KubeVirt client on
// the test's API server (it reads the VMI's NADs for their SR-IOV resourceName), a cluster config made from
// kv (the KubeVirt CR as the server stored it), and the VMI defaulted as virt-api's mutating webhook
// defaults it (pkg/virt-api/webhooks/mutating-webhook/mutators/vmi-mutator.go).
func (c *cluster) renderLauncherPod(t *testing.T, kv *kubevirtv1.KubeVirt, vmi *kubevirtv1.VirtualMachineInstance) *corev1.Pod {
	t.Helper()
	virtClient, err := kubecli.GetKubevirtClientFromRESTConfig(rest.CopyConfig(c.config))
	require.NoError(t, err)
	clusterConfig, _, _ := testutils.NewFakeClusterConfigUsingKV(kv.DeepCopy())
	vmi = vmi.DeepCopy()
	require.NoError(t, defaults.SetDefaultVirtualMachineInstance(clusterConfig, vmi))
	netGenerator := netannotations.NewGenerator(clusterConfig)
	store := func() cache.Store { return cache.NewStore(cache.MetaNamespaceKeyFunc) }
	svc := services.NewTemplateService("quay.io/kubevirt/virt-launcher:"+kubevirtTag(t),
		240,
		"/var/run/kubevirt",
		"/var/run/kubevirt-ephemeral-disks",
		"/var/run/kubevirt/container-disks",
		kubevirtv1.HotplugDiskDir,
		"",
		store(),
		virtClient,
		clusterConfig,
		107,
		"quay.io/kubevirt/virt-exportserver:"+kubevirtTag(t),
		store(),
		store(),
		services.WithSidecarCreator(
			func(vmi *kubevirtv1.VirtualMachineInstance, _ *kubevirtv1.KubeVirtConfiguration) (hooks.HookSidecarList, error) {
				return hooks.UnmarshalHookSidecarList(vmi)
			}),
		services.WithSidecarCreator(netbinding.NetBindingPluginSidecarList),
		services.WithNetMemoryCalculator(netresources.MemoryCalculator{}),
		services.WithAnnotationsGenerators(netGenerator, storageannotations.Generator{}),
		services.WithNetTargetAnnotationsGenerator(netGenerator),
	)
	pod, err := svc.RenderLaunchManifest(vmi)
	require.NoError(t, err, "render the launcher pod of VMI %s", vmi.Name)
	// The template has no namespace: virt-controller creates the pod in the VMI's (pkg/virt-controller/watch/vmi).
	require.Empty(t, pod.Namespace)
	pod.Namespace = vmi.Namespace
	return pod
}

// createPod creates pod through the API server (dry-run: admitted and defaulted, not stored).
func (c *cluster) createPod(t *testing.T, pod *corev1.Pod, dryRun bool) *corev1.Pod {
	t.Helper()
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	created, err := c.kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, opts)
	require.NoError(t, err, "create pod %s%s", pod.GenerateName, pod.Name)
	return created
}

// podInfoMounted reports whether the pod has the policy's volume.
func podInfoMounted(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == podInfoVolume {
			return true
		}
	}
	return false
}

// waitForMutation creates pod with dry-run until the MutatingAdmissionPolicy's effect is (or is no
// longer) there: policy and binding reach the admission plugin through an informer, some time after the
// server stored them.
// A denial meanwhile (the pod-info-mounted policy can be in force before the MutatingAdmissionPolicy is) is
// waited out too.
func (c *cluster) waitForMutation(t *testing.T, pod *corev1.Pod, want bool) {
	t.Helper()
	var last *corev1.Pod
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last, lastErr = c.kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return lastErr == nil && podInfoMounted(last) == want, nil
	})
	require.NoError(t, err, "MutatingAdmissionPolicy effect present=%v never observed; last: %v %+v", want, lastErr, last)
}

// decided strips what the server assigns per request (name from generateName, uid, times, versions,
// managed fields), leaving what admission and defaulting decided.
func decided(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.Name, out.UID, out.ResourceVersion, out.Generation = "", "", "", 0
	out.CreationTimestamp = metav1.Time{}
	out.ManagedFields = nil
	out.Status = corev1.PodStatus{}
	return out
}

// withoutPodInfo removes the policy's volume and its mount from container, and returns that mount.
func withoutPodInfo(t *testing.T, pod *corev1.Pod, container string) (*corev1.Pod, corev1.Volume, []corev1.VolumeMount) {
	t.Helper()
	out := pod.DeepCopy()
	var volume corev1.Volume
	var volumes []corev1.Volume
	for _, v := range out.Spec.Volumes {
		if v.Name == podInfoVolume {
			volume = v
			continue
		}
		volumes = append(volumes, v)
	}
	out.Spec.Volumes = volumes
	var removed []corev1.VolumeMount
	for i := range out.Spec.Containers {
		var mounts []corev1.VolumeMount
		for _, m := range out.Spec.Containers[i].VolumeMounts {
			if m.Name == podInfoVolume {
				assert.Equal(t, container, out.Spec.Containers[i].Name, "pod-info mounted into another container")
				removed = append(removed, m)
				continue
			}
			mounts = append(mounts, m)
		}
		out.Spec.Containers[i].VolumeMounts = mounts
	}
	return out, volume, removed
}

// sidecarRunning returns the name of the hook sidecar running image (which must exist).
func sidecarRunning(t *testing.T, pod *corev1.Pod, image string) string {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if strings.HasPrefix(c.Name, "hook-sidecar-") && c.Image == image {
			return c.Name
		}
	}
	require.Failf(t, "no hook sidecar", "running %s in %v", image, pod.Spec.Containers)
	return ""
}

func testLauncherPod(t *testing.T, c *cluster, k *kubectl) {
	ctx := context.Background()
	// kube-controller-manager would create it; the ServiceAccount admission plugin needs it for any pod.
	_, err := c.kube.CoreV1().ServiceAccounts(vmNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// KubeVirt's own passt binding sidecar, registered beside ours as a user of both would.
	passtImage := "quay.io/kubevirt/network-passt-binding:" + kubevirtTag(t)
	passt := `{"spec":{"configuration":{"network":{"binding":{"passt":{"sidecarImage":"` + passtImage + `"}}}}}}`
	_, err = c.dynamic.Resource(kvGVR).Namespace(kvNamespace).Patch(ctx, kvName, types.MergePatchType, []byte(passt), metav1.PatchOptions{})
	require.NoError(t, err)
	kv := c.getTypedKubeVirt(t)
	ourImage := kv.Spec.Configuration.NetworkConfiguration.Binding[bindingName].SidecarImage
	require.Contains(t, ourImage, "sriov-udn-binding", "the image name the MutatingAdmissionPolicy looks for")

	// The VMIs, created through the API server (and so admitted by the policies) and read back.
	podNICPasst := func(t *testing.T, obj *unstructured.Unstructured) {
		editInterface(t, obj, "default", func(m map[string]any) {
			delete(m, "masquerade")
			m["binding"] = map[string]any{"name": "passt"}
		})
	}
	vmis := map[string]func(*testing.T, *unstructured.Unstructured){
		"ours":                     func(*testing.T, *unstructured.Unstructured) {},
		"ours and passt":           podNICPasst,
		"passt only":               func(t *testing.T, o *unstructured.Unstructured) { withBinding(t, o, ""); podNICPasst(t, o) },
		"no binding plugin at all": func(t *testing.T, o *unstructured.Unstructured) { withBinding(t, o, "") },
	}
	pods := map[string]*corev1.Pod{}
	for name, edit := range vmis {
		vmi := vmiFrom(t, exampleVM(t))
		edit(t, vmi)
		require.NoError(t, c.write(t, vmi, nil).err, "VMI %s", name)
		pods[name] = c.renderLauncherPod(t, kv, toVMI(t, c.get(t, c.restMapper(t), vmi)))
	}
	ours := pods["ours"]
	ourSidecar := sidecarRunning(t, ours, ourImage)
	bothSidecar := sidecarRunning(t, pods["ours and passt"], ourImage)
	sidecarRunning(t, pods["ours and passt"], passtImage)
	sidecarRunning(t, pods["passt only"], passtImage)

	// Without the MutatingAdmissionPolicy (its binding removed, as on a server that does not serve the API or
	// a cluster where it was never installed) our sidecar would start without the pod-info volume: the pod is
	// denied, naming the prerequisite; a pod without our sidecar is not.
	c.waitForMutation(t, ours, true)
	require.NoError(t, c.dynamic.Resource(c.mapBindingGVR()).Delete(ctx, mapName, metav1.DeleteOptions{}))
	t.Run("without the MutatingAdmissionPolicy a pod with our sidecar is denied, naming the prerequisite", func(t *testing.T) {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, last = c.kube.CoreV1().Pods(ours.Namespace).Create(ctx, ours, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return last != nil, nil
		})
		require.NoError(t, err, "never denied")
		msg := strings.Join(strings.Fields(last.Error()), " ")
		assert.Contains(t, msg, "'"+podInfoMountedPolicy+"'")
		assert.Contains(t, msg, "the sriov-udn-binding sidecar "+ourSidecar+" has no pod-info volume at "+podInfoDir)
		assert.Contains(t, msg, "The MutatingAdmissionPolicy "+mapName+", which mounts it, did not mutate this pod")
		t.Logf("the denial: %s", msg)
		for _, name := range []string{"passt only", "no binding plugin at all"} {
			c.createPod(t, pods[name], true)
		}
	})
	// The same pods admitted without either policy: remove that one's binding too, create them (dry-run),
	// and put both back with the user's kustomization (docs/install.md). The difference between the two is
	// exactly what the MutatingAdmissionPolicy did, and nothing else.
	require.NoError(t, c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, podInfoMountedPolicy, metav1.DeleteOptions{}))
	// Both reach the admission plugins through informers: wait until the pod is admitted and not mutated.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		created, err := c.kube.CoreV1().Pods(ours.Namespace).Create(ctx, ours, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && !podInfoMounted(created), nil
	})
	require.NoError(t, err, "never admitted unmutated without the bindings of %s and %s", mapName, podInfoMountedPolicy)
	baseline := map[string]*corev1.Pod{}
	for name, pod := range pods {
		baseline[name] = decided(c.createPod(t, pod, true))
	}
	require.NotEmpty(t, c.installed, "docs/install.md ran first")
	out, err := k.applyKustomize(c.installed)
	require.NoError(t, err, "kubectl apply -k %s: %s", c.installed, out)
	c.waitForMutation(t, ours, true)

	for name, container := range map[string]string{"ours": ourSidecar, "ours and passt": bothSidecar} {
		t.Run(name+": pod-info is mounted into our sidecar only and nothing else changes", func(t *testing.T) {
			created := decided(c.createPod(t, pods[name], false))
			rest, volume, mounts := withoutPodInfo(t, created, container)
			assert.Equal(t, baseline[name], rest, "the pod apart from the pod-info volume and mount")
			assertPodInfoAdded(t, created, container, volume, mounts)
		})
		t.Run(name+": creating the same pod again is idempotent", func(t *testing.T) {
			first := decided(c.createPod(t, pods[name], false))
			again := decided(c.createPod(t, pods[name], false))
			assert.Equal(t, first, again)
			// An already mutated pod (reinvocation, or a pod copied from a mutated one) gains nothing.
			remade := first.DeepCopy()
			remade.GenerateName = pods[name].GenerateName
			assert.Equal(t, first, decided(c.createPod(t, remade, false)))
		})
	}
	for _, name := range []string{"passt only", "no binding plugin at all"} {
		t.Run(name+": the pod is untouched", func(t *testing.T) {
			assert.Equal(t, baseline[name], decided(c.createPod(t, pods[name], false)))
		})
	}
	t.Run("our image in a container that is not a hook sidecar: untouched", func(t *testing.T) {
		pod := pods["no binding plugin at all"].DeepCopy()
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "not-a-hook-sidecar", Image: ourImage})
		created := c.createPod(t, pod, false)
		assert.False(t, podInfoMounted(created))
		for _, ctr := range created.Spec.Containers {
			for _, m := range ctr.VolumeMounts {
				assert.NotEqual(t, podInfoVolume, m.Name, ctr.Name)
			}
		}
	})
}

// assertPodInfoAdded checks, field by field, the pod-info volume and mount that the MutatingAdmissionPolicy (or the
// webhook) added to created for its sidecar container, as withoutPodInfo found them.
func assertPodInfoAdded(t *testing.T, created *corev1.Pod, container string, volume corev1.Volume, mounts []corev1.VolumeMount) {
	t.Helper()
	require.NotNil(t, volume.DownwardAPI, "volume %s: %+v", podInfoVolume, volume)
	var files []string
	for _, item := range volume.DownwardAPI.Items {
		require.NotNil(t, item.FieldRef)
		files = append(files, item.Path+"<-"+item.FieldRef.FieldPath)
	}
	assert.Equal(t, []string{"labels<-metadata.labels", "annotations<-metadata.annotations"}, files)
	assert.Equal(t, podInfoVolume, created.Spec.Volumes[len(created.Spec.Volumes)-1].Name, "appended after KubeVirt's volumes")
	assert.Equal(t, []corev1.VolumeMount{{Name: podInfoVolume, MountPath: podInfoDir, ReadOnly: true}}, mounts)
	for _, ctr := range created.Spec.Containers {
		if ctr.Name == container {
			assert.Equal(t, podInfoVolume, ctr.VolumeMounts[len(ctr.VolumeMounts)-1].Name)
		}
	}
}
