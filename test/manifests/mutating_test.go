package manifests_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
)

var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// compiledMAP is a MutatingAdmissionPolicy compiled the way kube-apiserver v1.34 compiles it
// (k8s.io/apiserver mutating/compilation.go compilePolicy, unexported).
type compiledMAP struct {
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
	env      *plugincel.CompositionEnv
}

func compileMAP(t *testing.T, policy *admissionregistrationv1beta1.MutatingAdmissionPolicy) compiledMAP {
	t.Helper()
	opts := plugincel.OptionalVariableDeclarations{HasParams: policy.Spec.ParamKind != nil, StrictCost: true, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true))
	require.NoError(t, err)
	for _, v := range policy.Spec.Variables {
		res := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.StoredExpressions)
		require.Nil(t, res.Error, "variable %s: %v", v.Name, res.Error)
	}
	out := compiledMAP{env: compiler.CompositionEnv}
	accessors := make([]plugincel.ExpressionAccessor, len(policy.Spec.MatchConditions))
	for i := range policy.Spec.MatchConditions {
		mc := (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i])
		res := compiler.CompileCELExpression(mc, opts, environment.StoredExpressions)
		require.Nil(t, res.Error, "matchCondition %s: %v", mc.Name, res.Error)
		accessors[i] = mc
	}
	require.NotNil(t, policy.Spec.FailurePolicy)
	failurePolicy := admissionregistrationv1.FailurePolicyType(*policy.Spec.FailurePolicy)
	out.matcher = matchconditions.NewMatcher(compiler.CompileCondition(accessors, opts, environment.StoredExpressions), &failurePolicy, "policy", "mutate", policy.Name)

	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for i, m := range policy.Spec.Mutations {
		switch m.PatchType {
		case admissionregistrationv1beta1.PatchTypeApplyConfiguration:
			require.NotNil(t, m.ApplyConfiguration, "mutation %d", i)
			eval := compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, patchOpts, environment.StoredExpressions)
			require.Empty(t, eval.CompilationErrors(), "mutation %d", i)
			out.patchers = append(out.patchers, patch.NewApplyConfigurationPatcher(eval))
		case admissionregistrationv1beta1.PatchTypeJSONPatch:
			require.NotNil(t, m.JSONPatch, "mutation %d", i)
			eval := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOpts, environment.StoredExpressions)
			require.Empty(t, eval.CompilationErrors(), "mutation %d", i)
			out.patchers = append(out.patchers, patch.NewJSONPatcher(eval))
		default:
			require.Failf(t, "unknown patch type", "mutation %d: %q", i, m.PatchType)
		}
	}
	return out
}

// admit runs the policy on a pod CREATE: (matched, mutated pod).
func (c compiledMAP) admit(t *testing.T, pod *corev1.Pod) (bool, *corev1.Pod) {
	t.Helper()
	attrs := admission.NewAttributesRecord(pod, nil, podGVK, pod.Namespace, pod.Name, podGVR, "", admission.Create, nil, false, &user.DefaultInfo{Name: "virt-controller"})
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: podGVK, VersionedObject: pod}
	// One variables context per policy invocation, as mutating/dispatcher.go Dispatch does.
	ctx := c.env.CreateContext(context.Background())
	match := c.matcher.Match(ctx, versioned, nil, nil)
	require.NoError(t, match.Error)
	if !match.Matches {
		return false, pod
	}
	tc := applyconfigurations.NewTypeConverter(scheme.Scheme)
	objectInterfaces := admission.NewObjectInterfacesFromScheme(scheme.Scheme)
	var obj runtime.Object = pod
	for i, p := range c.patchers {
		versioned.VersionedObject = obj
		out, err := p.Patch(ctx, patch.Request{
			MatchedResource:     podGVR,
			VersionedAttributes: versioned,
			ObjectInterfaces:    objectInterfaces,
			TypeConverter:       tc,
		}, celconfig.RuntimeCELCostBudget)
		require.NoError(t, err, "mutation %d", i)
		// A typed request object gets a typed result back, as mutating/dispatcher.go dispatchOne does.
		obj, err = objectInterfaces.GetObjectConvertor().ConvertToVersion(out, corev1.SchemeGroupVersion)
		require.NoError(t, err, "mutation %d", i)
	}
	mutated, ok := obj.(*corev1.Pod)
	require.True(t, ok, "patch returned %T", obj)
	return true, mutated
}

func loadMAP(t *testing.T) *admissionregistrationv1beta1.MutatingAdmissionPolicy {
	return loadTyped[*admissionregistrationv1beta1.MutatingAdmissionPolicy](t, filepath.Join(manifestsDir, "podinfo-policy", "mutating-policy.yaml"))
}

// launcherPod is a trimmed virt-launcher pod as virt-controller renders it: compute, then one
// hook-sidecar-N container per binding plugin (template.go newSidecarContainerRenderer).
func launcherPod(sidecarImages ...string) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm-abcde", Namespace: "vm-workloads", Labels: map[string]string{"kubevirt.io": "virt-launcher"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "compute",
				Image: "quay.io/kubevirt/virt-launcher:v1.8.0",
				VolumeMounts: []corev1.VolumeMount{
					{Name: "hook-sidecar-sockets", MountPath: "/var/run/kubevirt-hooks"},
					{Name: "network-info-annotation", MountPath: "/etc/podinfo"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "hook-sidecar-sockets", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "network-info-annotation", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "network-info", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['kubevirt.io/network-info']"}}},
				}}},
			},
		},
	}
	for i, image := range sidecarImages {
		name := "hook-sidecar-" + string(rune('0'+i))
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:  name,
			Image: image,
			Env:   []corev1.EnvVar{{Name: "CONTAINER_NAME", Value: name}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "hook-sidecar-sockets", MountPath: "/var/run/kubevirt-hooks", SubPath: name},
				{Name: "network-info-annotation", MountPath: "/etc/podinfo"},
			},
		})
	}
	return pod
}

func containerByName(t *testing.T, pod *corev1.Pod, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no container", "%s", name)
	return corev1.Container{}
}

func TestMutatingPolicy_MountsPodInfoIntoOurSidecarOnly(t *testing.T) {
	policy := compileMAP(t, loadMAP(t))
	const ours = "ghcr.io/sriov-udn-binding/sriov-udn-binding:v0.1.0"
	withVolumes := launcherPod("quay.io/kubevirt/network-passt-binding:v1.8.0", ours)
	// A pod with no volumes at all takes the other branch of the JSON patch.
	withoutVolumes := launcherPod("quay.io/kubevirt/network-passt-binding:v1.8.0", ours)
	withoutVolumes.Spec.Volumes = nil
	for _, c := range withoutVolumes.Spec.Containers {
		c.VolumeMounts = nil
	}
	for name, pod := range map[string]*corev1.Pod{"pod with volumes": withVolumes, "pod without volumes": withoutVolumes} {
		t.Run(name, func(t *testing.T) { checkPodInfoMutation(t, policy, pod, ours) })
	}
}

func checkPodInfoMutation(t *testing.T, policy compiledMAP, pod *corev1.Pod, ours string) {
	original := pod.DeepCopy()

	matched, mutated := policy.admit(t, pod)
	require.True(t, matched)
	assert.Equal(t, original, pod, "the request object must not be modified in place")

	var podinfo *corev1.Volume
	for i := range mutated.Spec.Volumes {
		if mutated.Spec.Volumes[i].Name == "sriov-udn-podinfo" {
			podinfo = &mutated.Spec.Volumes[i]
		}
	}
	require.NotNil(t, podinfo, "volumes: %+v", mutated.Spec.Volumes)
	require.NotNil(t, podinfo.DownwardAPI)
	assert.Equal(t, []corev1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
	}, podinfo.DownwardAPI.Items)
	assert.Len(t, mutated.Spec.Volumes, len(original.Spec.Volumes)+1, "existing volumes are kept")

	sidecar := containerByName(t, mutated, "hook-sidecar-1")
	assert.Equal(t, append(containerByName(t, original, "hook-sidecar-1").VolumeMounts,
		corev1.VolumeMount{Name: "sriov-udn-podinfo", MountPath: podInfoDir, ReadOnly: true}), sidecar.VolumeMounts)
	assert.Equal(t, ours, sidecar.Image)
	assert.Equal(t, containerByName(t, original, "compute"), containerByName(t, mutated, "compute"), "compute untouched")
	assert.Equal(t, containerByName(t, original, "hook-sidecar-0"), containerByName(t, mutated, "hook-sidecar-0"), "other plugins untouched")
	assert.Len(t, mutated.Spec.Containers, len(original.Spec.Containers), "no container added")

	// reinvocationPolicy IfNeeded: a second pass must change nothing.
	_, again := policy.admit(t, mutated)
	assert.Equal(t, mutated.Spec, again.Spec)
}

func TestMutatingPolicy_LeavesPodsWithoutOurSidecarAlone(t *testing.T) {
	policy := compileMAP(t, loadMAP(t))
	cases := map[string]*corev1.Pod{
		"no sidecar":          launcherPod(),
		"another plugin only": launcherPod("quay.io/kubevirt/network-passt-binding:v1.8.0"),
	}
	notASidecar := launcherPod()
	notASidecar.Spec.Containers = append(notASidecar.Spec.Containers, corev1.Container{Name: "guest-console-log", Image: "example.com/sriov-udn-binding:v1"})
	cases["our image in a container that is not a hook sidecar"] = notASidecar
	for name, pod := range cases {
		t.Run(name, func(t *testing.T) {
			matched, _ := policy.admit(t, pod)
			assert.False(t, matched)
		})
	}
}
