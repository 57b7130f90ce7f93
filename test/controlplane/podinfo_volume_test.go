package controlplane_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The policies of manifests/policy/podinfo-volume-policy.yaml: the pod-info volume names are reserved
// for the volume a patched virt-handler reads the pod's network-status from (patches/kubevirt/README.md).
const (
	podInfoVolumePolicy = "sriov-udn-binding-podinfo-volume.kubevirt.io"
	podInfoPodPolicy    = "sriov-udn-binding-podinfo-pod.kubevirt.io"
)

// withVolume adds a volume to the VM (or VMI).
func withVolume(volume map[string]any) mutation {
	return func(t *testing.T, obj *unstructured.Unstructured) {
		vols, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "volumes")...)
		require.NoError(t, err)
		setField(t, obj, append(vols, volume), "volumes")
	}
}

// forgedDownwardAPI is a VMI downwardAPI volume whose annotations item is one raw annotation value, which
// a VMI owner controls (VMI annotations are copied to the launcher pod).
func forgedDownwardAPI(name string) map[string]any {
	return map[string]any{"name": name, "downwardAPI": map[string]any{"fields": []any{
		map[string]any{"path": "annotations", "fieldRef": map[string]any{"fieldPath": "metadata.annotations['note']"}},
	}}}
}

func testPodInfoVolumeVerdicts(t *testing.T, c *cluster) {
	binding := func(name string) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { withBinding(t, obj, name) }
	}
	cases := []verdictCase{
		{name: "a downwardAPI volume named sriov-udn-podinfo is denied", mutate: []mutation{withVolume(forgedDownwardAPI("sriov-udn-podinfo"))},
			policy: podInfoVolumePolicy, wantMsg: []string{"defines a volume named sriov-udn-podinfo", "rename the volume"}},
		{name: "a downwardAPI volume named podinfo (KubeVirt's pod-info) is denied", mutate: []mutation{withVolume(forgedDownwardAPI("podinfo"))},
			policy: podInfoVolumePolicy, wantMsg: []string{"defines a volume named podinfo"}},
		{name: "a volume of another type under the reserved name is denied",
			mutate: []mutation{withVolume(map[string]any{"name": "sriov-udn-podinfo", "configMap": map[string]any{"name": "x"}})},
			policy: podInfoVolumePolicy, wantMsg: []string{"sriov-udn-podinfo"}},
		{name: "with another binding plugin it is denied too (virt-handler reads any plugin's entry)",
			mutate: []mutation{binding("passt"), withVolume(forgedDownwardAPI("sriov-udn-podinfo"))}, policy: podInfoVolumePolicy},
		{name: "without a binding plugin it is not our business", mutate: []mutation{binding(""), withVolume(forgedDownwardAPI("podinfo"))}},
		{name: "a downwardAPI volume of another name is admitted", mutate: []mutation{withVolume(forgedDownwardAPI("user-info"))}},
	}
	runVerdicts(t, c, cases, func(t *testing.T, kind string, obj *unstructured.Unstructured, _ verdictCase, msg string) {
		path := "spec.volumes"
		if kind == "VirtualMachine" {
			path = "spec.template.spec.volumes"
		}
		assert.Contains(t, msg, kind+" "+obj.GetName()+": "+path+" defines")
	})
}

// launcherPodWith is a virt-launcher pod (by its label) with a compute container and a hook sidecar, and
// the given volumes, mounted into the named containers.
func launcherPodWith(volumes []corev1.Volume, mounts map[string]corev1.VolumeMount) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-launcher-podinfo-", Namespace: vmNamespace,
			Labels: map[string]string{"kubevirt.io": "virt-launcher"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "compute", Image: "compute"}, {Name: "hook-sidecar-0", Image: "sidecar"}},
			Volumes:    volumes,
		},
	}
	for i := range pod.Spec.Containers {
		if m, ok := mounts[pod.Spec.Containers[i].Name]; ok {
			pod.Spec.Containers[i].VolumeMounts = append(pod.Spec.Containers[i].VolumeMounts, m)
		}
	}
	return pod
}

func downwardAPIVolume(name string, items ...corev1.DownwardAPIVolumeFile) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}}
}

func item(path, fieldPath string) corev1.DownwardAPIVolumeFile {
	return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{FieldPath: fieldPath}}
}

func testPodInfoPodVerdicts(t *testing.T, c *cluster) {
	ctx := context.Background()
	pinned := []corev1.DownwardAPIVolumeFile{item("labels", "metadata.labels"), item("annotations", "metadata.annotations")}
	sidecarMount := map[string]corev1.VolumeMount{"hook-sidecar-0": {Name: podInfoVolume, MountPath: podInfoDir, ReadOnly: true}}
	forged := launcherPodWith([]corev1.Volume{downwardAPIVolume(podInfoVolume, item("labels", "metadata.labels"),
		item("annotations", "metadata.annotations['note']"))}, sidecarMount)

	dryRun := func(pod *corev1.Pod) error {
		_, err := c.kube.CoreV1().Pods(vmNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// The policy reaches the admission plugin through an informer, some time after the server stored it.
	var last error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = dryRun(forged)
		return last != nil && strings.Contains(last.Error(), "'"+podInfoPodPolicy+"'"), nil
	}), "policy %s not in force: %v", podInfoPodPolicy, last)

	cases := []struct {
		name    string
		pod     *corev1.Pod
		wantMsg string // "" when admitted
	}{
		{"the pod-info volume mounted read-only into a hook sidecar is admitted",
			launcherPodWith([]corev1.Volume{downwardAPIVolume(podInfoVolume, pinned...)}, sidecarMount), ""},
		{"KubeVirt's podinfo volume of the same shape is admitted",
			launcherPodWith([]corev1.Volume{downwardAPIVolume("podinfo", pinned...)}, nil), ""},
		{"a forged annotations item is denied", forged, "is reserved for the pod-info volume"},
		{"an extra item is denied", launcherPodWith([]corev1.Volume{downwardAPIVolume(podInfoVolume,
			append(pinned, item("name", "metadata.name"))...)}, nil), "exactly the items labels"},
		{"another volume type under the name is denied", launcherPodWith([]corev1.Volume{{Name: podInfoVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, nil), "is reserved for the pod-info volume"},
		{"both names at once are denied", launcherPodWith([]corev1.Volume{downwardAPIVolume(podInfoVolume, pinned...),
			downwardAPIVolume("podinfo", pinned...)}, nil), "at most one pod-info volume"},
		{"a mount into compute is denied", launcherPodWith([]corev1.Volume{downwardAPIVolume(podInfoVolume, pinned...)},
			map[string]corev1.VolumeMount{"compute": {Name: podInfoVolume, MountPath: "/x", ReadOnly: true}}), "container compute mounts the pod-info volume"},
		{"a writable mount is denied", launcherPodWith([]corev1.Volume{downwardAPIVolume(podInfoVolume, pinned...)},
			map[string]corev1.VolumeMount{"hook-sidecar-0": {Name: podInfoVolume, MountPath: podInfoDir}}), "read-only and whole"},
		{"a pod without the launcher label is not our business", func() *corev1.Pod {
			pod := forged.DeepCopy()
			pod.Labels = nil
			return pod
		}(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := dryRun(tc.pod)
			if tc.wantMsg == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+podInfoPodPolicy+"' with binding '"+podInfoPodPolicy+"' denied request: ")
			assert.Contains(t, err.Error(), tc.wantMsg)
		})
	}
}
