package admission

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const ourImage = "registry.example.com/sriov-udn-binding:v0.1.0"

var defaultRule = Rule{ImageSubstring: ImageMarker}

// launcherPod is a virt-launcher pod as KubeVirt renders it, trimmed: the compute container, then sidecars.
func launcherPod(sidecars ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-launcher-vm-", Namespace: "vm", Labels: map[string]string{"kubevirt.io": "virt-launcher"}},
		Spec: corev1.PodSpec{
			Containers: append([]corev1.Container{{
				Name: "compute", Image: "quay.io/kubevirt/virt-launcher:v1.8.4",
				VolumeMounts: []corev1.VolumeMount{{Name: "private", MountPath: "/var/run/kubevirt-private"}},
			}}, sidecars...),
			Volumes: []corev1.Volume{{Name: "private", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

func sidecar(name, image string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{Name: name, Image: image, VolumeMounts: mounts}
}

var hooksMount = corev1.VolumeMount{Name: "hook-sidecar-sockets", MountPath: "/var/run/kubevirt-hooks"}

// mapResult is what manifests/podinfo-policy's MutatingAdmissionPolicy makes of pod, written out by hand
// from its CEL: the volume appended unless one of its name exists, the mount appended to each of our sidecars
// (merged by mountPath, so none when a mount at that path exists).
func mapResult(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	ours := func(c *corev1.Container) bool {
		return strings.HasPrefix(c.Name, "hook-sidecar-") && strings.Contains(c.Image, "sriov-udn-binding")
	}
	if !slices.ContainsFunc(out.Spec.Containers, func(c corev1.Container) bool { return ours(&c) }) {
		return out
	}
	if !slices.ContainsFunc(out.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "sriov-udn-podinfo" }) {
		out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: "sriov-udn-podinfo", VolumeSource: corev1.VolumeSource{
			DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
			}},
		}})
	}
	for i := range out.Spec.Containers {
		c := &out.Spec.Containers[i]
		if ours(c) && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == "/var/run/kubevirt-private/downwardapi/podinfo"
		}) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{
				Name: "sriov-udn-podinfo", MountPath: "/var/run/kubevirt-private/downwardapi/podinfo", ReadOnly: true,
			})
		}
	}
	return out
}

// decoded is pod as the webhook decodes it from its JSON.
func decoded(t *testing.T, pod *corev1.Pod) *Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	require.NoError(t, err)
	var out Pod
	require.NoError(t, json.Unmarshal(doc, &out))
	return &out
}

// patched applies the patch for pod, through its JSON, to pod's JSON with an RFC 6902 applier.
func patched(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	require.NoError(t, err)
	patch, err := json.Marshal(defaultRule.PodInfoPatch(decoded(t, pod)))
	require.NoError(t, err)
	got, err := applyAdds(doc, patch)
	require.NoError(t, err, "patch %s", patch)
	var out corev1.Pod
	require.NoError(t, json.Unmarshal(got, &out))
	return &out
}

func TestPodInfoPatch_GivesWhatTheMutatingAdmissionPolicyGives_AndReinvocationAddsNothing(t *testing.T) {
	noVolumes := launcherPod(sidecar("hook-sidecar-0", ourImage))
	noVolumes.Spec.Volumes = nil
	emptyVolumes := launcherPod(sidecar("hook-sidecar-0", ourImage))
	emptyVolumes.Spec.Volumes = []corev1.Volume{}
	withVolume := mapResult(launcherPod(sidecar("hook-sidecar-0", ourImage, hooksMount)))
	withVolume.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{hooksMount}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		wantOps []string // op path, in order
	}{
		{"our sidecar with mounts", launcherPod(sidecar("hook-sidecar-0", ourImage, hooksMount)),
			[]string{"add /spec/volumes/-", "add /spec/containers/1/volumeMounts/-"}},
		{"our sidecar without volumeMounts", launcherPod(sidecar("hook-sidecar-0", ourImage)),
			[]string{"add /spec/volumes/-", "add /spec/containers/1/volumeMounts"}},
		{"no volumes at all", noVolumes, []string{"add /spec/volumes", "add /spec/containers/1/volumeMounts"}},
		{"an empty volumes list", emptyVolumes, []string{"add /spec/volumes", "add /spec/containers/1/volumeMounts"}},
		{"ours after passt's sidecar", launcherPod(sidecar("hook-sidecar-0", "quay.io/kubevirt/network-passt-binding:v1.8.4", hooksMount),
			sidecar("hook-sidecar-1", ourImage, hooksMount)),
			[]string{"add /spec/volumes/-", "add /spec/containers/2/volumeMounts/-"}},
		{"two of ours", launcherPod(sidecar("hook-sidecar-0", ourImage, hooksMount), sidecar("hook-sidecar-1", ourImage+"-other")),
			[]string{"add /spec/volumes/-", "add /spec/containers/1/volumeMounts/-", "add /spec/containers/2/volumeMounts"}},
		{"the volume exists, the mount does not", withVolume, []string{"add /spec/containers/1/volumeMounts/-"}},
		{"already mutated (reinvocation)", mapResult(launcherPod(sidecar("hook-sidecar-0", ourImage, hooksMount))), nil},
		{"a mount at the path already (KubeVirt's own pod-info)", launcherPod(sidecar("hook-sidecar-0", ourImage,
			corev1.VolumeMount{Name: "podinfo", MountPath: MountPath, ReadOnly: true})), []string{"add /spec/volumes/-"}},
		{"passt only", launcherPod(sidecar("hook-sidecar-0", "quay.io/kubevirt/network-passt-binding:v1.8.4")), nil},
		{"no sidecar", launcherPod(), nil},
		{"our image, not a hook sidecar", launcherPod(sidecar("not-a-hook-sidecar", ourImage)), nil},
		{"a hook sidecar without an image", launcherPod(sidecar("hook-sidecar-0", "")), nil},
		{"our image as an init container only", func() *corev1.Pod {
			p := launcherPod()
			p.Spec.InitContainers = []corev1.Container{sidecar("hook-sidecar-0", ourImage)}
			return p
		}(), nil},
		{"ours beside an unnamed, imageless container", launcherPod(sidecar("hook-sidecar-0", ourImage), corev1.Container{}),
			[]string{"add /spec/volumes/-", "add /spec/containers/1/volumeMounts"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := defaultRule.PodInfoPatch(decoded(t, tc.pod))
			var got []string
			for _, op := range ops {
				got = append(got, op.Op+" "+op.Path)
			}
			assert.Equal(t, tc.wantOps, got)
			after := patched(t, tc.pod)
			assert.Equal(t, mapResult(tc.pod), after, "the patched pod against the policy's result")
			assert.Nil(t, defaultRule.PodInfoPatch(decoded(t, after)), "a reinvocation adds nothing")
		})
	}
}

// A mirrored image under another name: the rule's substring finds it, and the default one does not.
func TestRule_ImageSubstring_FindsARenamedImage(t *testing.T) {
	pod := launcherPod(sidecar("hook-sidecar-0", "mirror.example.com/net/udn-vf-binding:v0.1.0", hooksMount))
	assert.Nil(t, defaultRule.PodInfoPatch(decoded(t, pod)))
	renamed := Rule{ImageSubstring: "udn-vf-binding"}
	assert.Len(t, renamed.PodInfoPatch(decoded(t, pod)), 2)
	assert.Nil(t, renamed.PodInfoPatch(decoded(t, launcherPod(sidecar("hook-sidecar-0", ourImage)))))
}

// The values above are the policy's: the policy file itself must name each of them, so that a change to one
// side fails here.
func TestPodInfoPatch_ValuesAreThePolicys(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "podinfo-policy", "mutating-policy.yaml"))
	require.NoError(t, err)
	policy := string(data)
	for _, want := range []string{
		"name: 'sriov-udn-podinfo'", "v.name == 'sriov-udn-podinfo'",
		"mountPath: '/var/run/kubevirt-private/downwardapi/podinfo'", "readOnly: true",
		"path: 'labels'", "fieldPath: 'metadata.labels'", "path: 'annotations'", "fieldPath: 'metadata.annotations'",
		"c.name.startsWith('hook-sidecar-')", "c.?image.orValue('').contains('sriov-udn-binding')",
	} {
		assert.Contains(t, policy, want)
	}
	assert.Equal(t, []string{VolumeName, MountPath, SidecarPrefix, ImageMarker},
		[]string{"sriov-udn-podinfo", "/var/run/kubevirt-private/downwardapi/podinfo", "hook-sidecar-", "sriov-udn-binding"})
}
