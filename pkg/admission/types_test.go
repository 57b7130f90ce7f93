package admission

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// strictly decodes data into v, refusing a field v's type does not have.
func strictly(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", data)
}

// The answers are k8s.io/api's AdmissionReview on the wire: every field we write is one of its, with the value
// kube-apiserver reads.
func TestTypes_ResponsesAreAdmissionV1OnTheWire(t *testing.T) {
	for name, body := range map[string][]byte{
		"patched": reviewOf(t, podKind, admissionv1.Create, podJSON(t, launcherPod(sidecar("hook-sidecar-0", ourImage)))),
		"refused": reviewOf(t, podKind, admissionv1.Create, []byte(`{}`)),
	} {
		t.Run(name, func(t *testing.T) {
			review, _, err := defaultRule.Review(body)
			require.NoError(t, err)
			data, err := json.Marshal(review)
			require.NoError(t, err)
			var got admissionv1.AdmissionReview
			strictly(t, data, &got)
			assert.Equal(t, metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, got.TypeMeta)
			require.NotNil(t, got.Response)
			assert.Equal(t, "7f0c-uid", string(got.Response.UID))
			assert.Equal(t, review.Response.Allowed, got.Response.Allowed)
			assert.Equal(t, review.Response.Patch, got.Response.Patch, "base64 both ways")
			if review.Response.Result != nil {
				assert.Equal(t, metav1.StatusFailure, got.Response.Result.Status)
				assert.Equal(t, metav1.StatusReasonBadRequest, got.Response.Result.Reason)
				assert.Equal(t, review.Response.Result.Message, got.Response.Result.Message)
				return
			}
			require.NotNil(t, got.Response.PatchType)
			assert.Equal(t, admissionv1.PatchTypeJSONPatch, *got.Response.PatchType)
		})
	}
}

// The values the patch adds are core/v1's Volume and VolumeMount, field for field.
func TestTypes_PatchValuesAreCoreV1(t *testing.T) {
	ops := defaultRule.PodInfoPatch(&Pod{Spec: PodSpec{Containers: []Container{{Name: "hook-sidecar-0", Image: ourImage}}}})
	require.Len(t, ops, 2)
	data, err := json.Marshal(ops[0].Value)
	require.NoError(t, err)
	var volumes []corev1.Volume
	strictly(t, data, &volumes)
	assert.Equal(t, []corev1.Volume{{Name: "sriov-udn-podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		},
	}}}}, volumes)
	data, err = json.Marshal(ops[1].Value)
	require.NoError(t, err)
	var mounts []corev1.VolumeMount
	strictly(t, data, &mounts)
	assert.Equal(t, []corev1.VolumeMount{{Name: "sriov-udn-podinfo", MountPath: "/var/run/kubevirt-private/downwardapi/podinfo", ReadOnly: true}}, mounts)
}

// What the webhook reads of a request, it reads under k8s.io/api's names.
func TestTypes_RequestsAreReadUnderAdmissionV1Names(t *testing.T) {
	pod := launcherPod(sidecar("hook-sidecar-3", ourImage, hooksMount))
	pod.Name = "virt-launcher-vm-abcde"
	body := reviewOf(t, podKind, admissionv1.Create, podJSON(t, pod))
	var in AdmissionReview
	require.NoError(t, json.Unmarshal(body, &in))
	require.NotNil(t, in.Request)
	assert.Equal(t, "7f0c-uid", in.Request.UID)
	assert.Equal(t, GroupVersionKind{Version: "v1", Kind: "Pod"}, in.Request.Kind)
	assert.Equal(t, "CREATE", in.Request.Operation)
	assert.Equal(t, "vm", in.Request.Namespace)
	var got Pod
	require.NoError(t, json.Unmarshal(in.Request.Object, &got))
	assert.Equal(t, Pod{
		APIVersion: "v1", Kind: "Pod",
		Metadata: PodMetadata{Name: "virt-launcher-vm-abcde", GenerateName: "virt-launcher-vm-"},
		Spec: PodSpec{
			Volumes: []NamedVolume{{Name: "private"}},
			Containers: []Container{
				{Name: "compute", Image: "quay.io/kubevirt/virt-launcher:v1.8.4", VolumeMounts: []VolumeMount{{Name: "private", MountPath: "/var/run/kubevirt-private"}}},
				{Name: "hook-sidecar-3", Image: ourImage, VolumeMounts: []VolumeMount{hooksMountOurs}},
			},
		},
	}, got)
}

var hooksMountOurs = VolumeMount{Name: hooksMount.Name, MountPath: hooksMount.MountPath}
