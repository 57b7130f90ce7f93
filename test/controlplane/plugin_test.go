package controlplane_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
)

var pluginGVR = schema.GroupVersionResource{Group: "plugin.kubevirt.io", Version: "v1alpha1", Resource: "plugins"}

const (
	pluginSocketsVolume = "kubevirt-plugin-sockets" // v1.9.0 pkg/virt-controller/services/template.go
	ourPluginName       = "sriov-udn-binding"       // manifests/plugin/plugin.yaml
)

// hasPluginAPI reports whether KubeVirt release v (vMAJOR.MINOR.PATCH) has the Plugin API: v1.9.0 on.
func hasPluginAPI(v string) bool {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 1 || major == 1 && minor >= 9)
}

// kubevirtPluginObjects are what virt-operator of that release installs for the Plugin API.
type kubevirtPluginObjects struct {
	CRD      *extv1.CustomResourceDefinition                             `json:"crd"`
	Policies []*admissionregistrationv1.ValidatingAdmissionPolicy        `json:"policies"`
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding `json:"bindings"`
}

// loadKubeVirtPluginObjects runs kubevirt_plugin_objects.go with the modfile the matrix uses for version
// (.ci/kubevirt-modfiles flag, a path relative to test/, where it runs), so the objects come from the
// KubeVirt this test binary links.
func loadKubeVirtPluginObjects(t *testing.T, version string) kubevirtPluginObjects {
	t.Helper()
	flag, err := exec.Command(filepath.Join("..", "..", ".ci", "kubevirt-modfiles"), "flag", version).Output()
	require.NoError(t, err, ".ci/kubevirt-modfiles flag %s", version)
	args := []string{"run"}
	if f := strings.TrimSpace(string(flag)); f != "" {
		args = append(args, f)
	}
	run := exec.Command("go", append(args, filepath.Join("controlplane", "kubevirt_plugin_objects.go"))...)
	run.Dir = ".."
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	require.NoError(t, err, "go %v: %s", args, stderr.String())
	var objs kubevirtPluginObjects
	require.NoError(t, json.Unmarshal(out, &objs))
	require.NotNil(t, objs.CRD)
	require.Len(t, objs.Policies, len(objs.Bindings))
	return objs
}

// testPluginAPI installs what virt-operator v1.9+ installs for the Plugin API (the Plugin CRD and its own
// plugin admission policies), applies manifests/overlays/plugin, and checks that our Plugin and the
// launcher pod our MutatingAdmissionPolicy mutates are admitted by KubeVirt's policies.
func testPluginAPI(t *testing.T, c *cluster) {
	version := kubevirtTag(t)
	if !hasPluginAPI(version) {
		t.Skipf("KubeVirt %s has no Plugin API (VEP-190 starts in v1.9.0): make test-controlplane runs this on v1.9.0", version)
	}
	ctx := context.Background()
	objs := loadKubeVirtPluginObjects(t, version)
	client, err := apiextensionsclient.NewForConfig(c.config)
	require.NoError(t, err)
	installCRD(t, ctx, client, objs.CRD)
	for _, p := range objs.Policies {
		_, err := c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err, "KubeVirt's policy %s", p.Name)
	}
	for _, b := range objs.Bindings {
		_, err := c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
		require.NoError(t, err, "KubeVirt's policy binding %s", b.Name)
	}

	ours := loadUnstructured(t, filepath.Join(manifestsDir, "plugin", "plugin.yaml"))
	require.Equal(t, ourPluginName, ours.GetName())
	hooks, _, err := unstructured.NestedSlice(ours.Object, "spec", "domainHooks")
	require.NoError(t, err)
	require.Len(t, hooks, 1)
	socket, _, err := unstructured.NestedString(hooks[0].(map[string]any), "sidecar", "socketPath")
	require.NoError(t, err)

	t.Run("KubeVirt's socket-path policy denies a Plugin whose socket is outside its directory", func(t *testing.T) {
		bad := ours.DeepCopy()
		bad.SetName("not-" + ourPluginName)
		// Policies reach the admission plugin through an informer, some time after they are stored.
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, last = c.dynamic.Resource(pluginGVR).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return last != nil, nil
		})
		require.NoError(t, err, "never denied")
		assert.Contains(t, last.Error(), "sidecar socketPath must start with /var/run/kubevirt-plugin/<plugin-name>/")
	})
	require.True(t, t.Run("kubectl apply -k manifests/overlays/plugin: admitted and stored", func(t *testing.T) {
		// The server lists a new CRD's resource in discovery some time after Established; kubectl maps
		// kinds through discovery (and caches it), so a user's apply right after the install can fail the
		// same way. Wait for it, then apply with a kubectl that has not cached the old discovery.
		dc, err := discovery.NewDiscoveryClientForConfig(c.config)
		require.NoError(t, err)
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			_, err := dc.ServerResourcesForGroupVersion(pluginGVR.GroupVersion().String())
			return err == nil, nil
		})
		require.NoError(t, err, "%s never served", pluginGVR.GroupVersion())
		c.applyAndReadBack(t, newKubectl(t, c.config), c.entryPoint(t, filepath.Join(manifestsDir, "overlays", "plugin")))
	}))

	// The gate makes virt-controller add the plugin socket volume to every launcher pod. KubeVirt's Beta gate
	// ImageVolume (on by default in v1.9.0) renders the example VM's containerDisk as an image volume, which
	// this kube-apiserver (1.34, Kubernetes gate ImageVolume off) drops with the init container's mount;
	// KubeVirt's own kubevirt-plugin-sidecar-subpath-policy then fails on the init container without
	// volumeMounts (no has() guard: "no such key: volumeMounts") and denies every such launcher pod. So the
	// Plugin API on Kubernetes 1.34 also needs ImageVolume disabled in KubeVirt (docs/plugin-api.md).
	gate := `[{"op":"add","path":"/spec/configuration/developerConfiguration/featureGates/-","value":"Plugins"},` +
		`{"op":"add","path":"/spec/configuration/developerConfiguration/disabledFeatureGates","value":["ImageVolume"]}]`
	_, err = c.dynamic.Resource(kvGVR).Namespace(kvNamespace).Patch(ctx, kvName, types.JSONPatchType, []byte(gate), metav1.PatchOptions{})
	require.NoError(t, err)
	kv := c.getTypedKubeVirt(t)
	ourImage := kv.Spec.Configuration.NetworkConfiguration.Binding[bindingName].SidecarImage
	vmi := vmiFrom(t, exampleVM(t))
	require.NoError(t, c.write(t, vmi, nil).err)
	pod := c.renderLauncherPod(t, kv, toVMI(t, c.get(t, c.restMapper(t), vmi)))
	require.True(t, hasVolume(pod, pluginSocketsVolume), "KubeVirt %s with gate Plugins renders the %s volume", version, pluginSocketsVolume)
	sidecar := sidecarRunning(t, pod, ourImage)

	var created *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		created = c.createPod(t, pod, true)
		return mountOf(created, sidecar, pluginSocketsVolume) != nil, nil
	})
	require.NoError(t, err, "our MutatingAdmissionPolicy never mounted %s into %s", pluginSocketsVolume, sidecar)

	t.Run("the launcher pod our policy mutated is admitted: subPath mount where the Plugin's socket is", func(t *testing.T) {
		created := c.createPod(t, pod, false)
		m := mountOf(created, sidecar, pluginSocketsVolume)
		require.NotNil(t, m)
		assert.Equal(t, corev1.VolumeMount{Name: pluginSocketsVolume, MountPath: "/var/run/kubevirt-plugin/" + ourPluginName, SubPath: ourPluginName}, *m)
		assert.Equal(t, m.MountPath, filepath.Dir(socket), "the Plugin's socket is in the mounted directory")
		// compute mounts the whole volume at /var/run/kubevirt-plugin, so it sees the socket at the same path.
		compute := mountOf(created, "compute", pluginSocketsVolume)
		require.NotNil(t, compute)
		assert.Equal(t, filepath.Join(compute.MountPath, m.SubPath, filepath.Base(socket)), socket)
		assert.Contains(t, envOf(created, sidecar), corev1.EnvVar{Name: "PLUGIN_SOCKET", Value: socket})
		for _, ctr := range created.Spec.Containers {
			if ctr.Name != sidecar && ctr.Name != "compute" {
				assert.Nil(t, mountOf(created, ctr.Name, pluginSocketsVolume), "container %s", ctr.Name)
			}
		}
		// An already mutated pod (reinvocation, or a copy of a mutated pod) gains nothing.
		remade := decided(created)
		remade.GenerateName = pod.GenerateName
		again := c.createPod(t, remade, false)
		assert.Equal(t, created.Spec.Containers, again.Spec.Containers, "idempotent on a mutated pod")
	})
	t.Run("KubeVirt's subPath policy is live: a sidecar mounting the socket volume whole is denied", func(t *testing.T) {
		bad := pod.DeepCopy()
		bad.Spec.Containers = append(bad.Spec.Containers, corev1.Container{Name: "hook-sidecar-99", Image: "example.com/other",
			VolumeMounts: []corev1.VolumeMount{{Name: pluginSocketsVolume, MountPath: "/var/run/kubevirt-plugin"}}})
		_, err := c.kube.CoreV1().Pods(bad.Namespace).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "sidecar containers must use subPath when mounting the plugin socket volume")
	})
	t.Run("a launcher pod without our sidecar is untouched", func(t *testing.T) {
		other := vmiFrom(t, exampleVM(t))
		withBinding(t, other, "")
		require.NoError(t, c.write(t, other, nil).err)
		otherPod := c.renderLauncherPod(t, kv, toVMI(t, c.get(t, c.restMapper(t), other)))
		got := c.createPod(t, otherPod, true)
		for _, ctr := range got.Spec.Containers {
			if ctr.Name != "compute" {
				assert.Nil(t, mountOf(got, ctr.Name, pluginSocketsVolume), "container %s", ctr.Name)
			}
		}
	})
}

func hasVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// mountOf returns container's mount of volume, or nil.
func mountOf(pod *corev1.Pod, container, volume string) *corev1.VolumeMount {
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name != container {
			continue
		}
		for i := range ctr.VolumeMounts {
			if ctr.VolumeMounts[i].Name == volume {
				return &ctr.VolumeMounts[i]
			}
		}
	}
	return nil
}

func envOf(pod *corev1.Pod, container string) []corev1.EnvVar {
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == container {
			return ctr.Env
		}
	}
	return nil
}

func TestHasPluginAPI(t *testing.T) {
	for v, want := range map[string]bool{"v1.8.4": false, "v1.9.0": true, "v1.10.0": true, "v2.0.0": true, "v1.9": true, "": false, "main": false} {
		assert.Equal(t, want, hasPluginAPI(v), v)
	}
}
