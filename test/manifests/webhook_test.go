package manifests_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// The pod-info webhook's entry points: for servers without MutatingAdmissionPolicy, so none may carry one.
var (
	webhookOverlay    = filepath.Join(manifestsDir, "overlays", "webhook")
	hcoWebhookOverlay = filepath.Join(manifestsDir, "overlays", "hco-webhook")
	certManager       = filepath.Join(manifestsDir, "components", "webhook-cert-manager")
)

func webhookEntryPoints(t *testing.T) map[string]string {
	return map[string]string{
		"overlays/webhook":                        webhookOverlay,
		"overlays/hco-webhook":                    hcoWebhookOverlay,
		"overlays/webhook + webhook-cert-manager": userKustomization(t, webhookOverlay, []string{certManager}, ""),
	}
}

func ofKind[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// Labels: TestLabels_EveryObjectOfEveryEntryPointIsOurs_ButTheCRsWeOnlyAddTo; no CR: TestKustomize_NoEntryPointHoldsTheCR.
func TestWebhookEntryPoints_NoMutatingAdmissionPolicy(t *testing.T) {
	for name, dir := range webhookEntryPoints(t) {
		t.Run(name, func(t *testing.T) {
			objs := build(t, dir)
			require.NotEmpty(t, objs)
			for _, o := range objs {
				id, _ := labelsOf(t, o)
				kind := o.GetObjectKind().GroupVersionKind().Kind
				assert.NotContains(t, []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}, kind, id)
			}
			require.Len(t, ofKind[*admissionregistrationv1.MutatingWebhookConfiguration](objs), 1)
			require.Len(t, ofKind[*appsv1.Deployment](objs), 1)
		})
	}
}

// The webhook is called for exactly the pods the MutatingAdmissionPolicy mutates: same operations, resources,
// objectSelector and matchCondition.
func TestWebhook_MatchesWhatTheMutatingAdmissionPolicyMatches(t *testing.T) {
	objs := build(t, filepath.Join(manifestsDir, "webhook"))
	hooks := ofKind[*admissionregistrationv1.MutatingWebhookConfiguration](objs)
	require.Len(t, hooks, 1)
	require.Len(t, hooks[0].Webhooks, 1)
	wh := hooks[0].Webhooks[0]
	maps := ofKind[*admissionregistrationv1beta1.MutatingAdmissionPolicy](build(t, filepath.Join(manifestsDir, "podinfo-policy")))
	require.Len(t, maps, 1)
	mp := maps[0].Spec

	require.Len(t, mp.MatchConstraints.ResourceRules, 1)
	policyRule := mp.MatchConstraints.ResourceRules[0].RuleWithOperations
	require.Len(t, wh.Rules, 1)
	assert.Equal(t, policyRule.Operations, wh.Rules[0].Operations)
	assert.Equal(t, policyRule.APIGroups, wh.Rules[0].APIGroups)
	assert.Equal(t, policyRule.APIVersions, wh.Rules[0].APIVersions)
	assert.Equal(t, policyRule.Resources, wh.Rules[0].Resources)
	assert.Equal(t, mp.MatchConstraints.ObjectSelector, wh.ObjectSelector)
	require.Len(t, mp.MatchConditions, 1)
	require.Len(t, wh.MatchConditions, 1)
	assert.Equal(t, mp.MatchConditions[0].Name, wh.MatchConditions[0].Name)
	assert.Equal(t, mp.MatchConditions[0].Expression, wh.MatchConditions[0].Expression)

	assert.Equal(t, ptr.To(admissionregistrationv1.Fail), wh.FailurePolicy, "a pod it cannot mutate is refused with its name")
	assert.Equal(t, ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy), wh.ReinvocationPolicy)
	assert.Equal(t, ptr.To(admissionregistrationv1.SideEffectClassNone), wh.SideEffects)
	assert.Equal(t, []string{"v1"}, wh.AdmissionReviewVersions)
	require.NotNil(t, wh.ClientConfig.Service)
	assert.Equal(t, "/mutate", ptr.Deref(wh.ClientConfig.Service.Path, ""))
	assert.Equal(t, "true", hooks[0].Annotations["service.beta.openshift.io/inject-cabundle"])
	assert.Equal(t, maps[0].Name, hooks[0].Name, "the webhook replaces the policy under its name")
}

// The Deployment runs the sidecar's image as the webhook, hardened; the Service reaches it; the images
// transformer names a mirrored image natively.
func TestWebhook_DeploymentServiceAndImage(t *testing.T) {
	objs := build(t, filepath.Join(manifestsDir, "webhook"))
	deps := ofKind[*appsv1.Deployment](objs)
	require.Len(t, deps, 1)
	d := deps[0]
	assert.Equal(t, ptr.To[int32](2), d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, shippedImage+":v0.1.0", c.Image)
	assert.Equal(t, "webhook", c.Args[0])
	assert.Contains(t, c.Args, "--tls-cert-file=/etc/sriov-udn-binding/tls/tls.crt")
	assert.Contains(t, c.Args, "--tls-key-file=/etc/sriov-udn-binding/tls/tls.key")
	assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, ptr.To[int64](107), pod.SecurityContext.RunAsUser)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	assert.Equal(t, ptr.To(true), c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, ptr.To(false), pod.AutomountServiceAccountToken, "the webhook reads nothing from the API")
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/healthz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, corev1.URISchemeHTTPS, c.ReadinessProbe.HTTPGet.Scheme)
	assert.NotNil(t, c.Resources.Requests.Memory())
	require.NotNil(t, c.Lifecycle, "serve while the endpoints drop a stopping pod")
	require.NotNil(t, c.Lifecycle.PreStop.Sleep)
	assert.Positive(t, c.Lifecycle.PreStop.Sleep.Seconds)

	svcs := ofKind[*corev1.Service](objs)
	require.Len(t, svcs, 1)
	assert.Equal(t, d.Spec.Selector.MatchLabels, svcs[0].Spec.Selector)
	assert.Equal(t, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	assert.Equal(t, int32(443), svcs[0].Spec.Ports[0].Port)
	hook := ofKind[*admissionregistrationv1.MutatingWebhookConfiguration](objs)[0].Webhooks[0].ClientConfig.Service
	assert.Equal(t, svcs[0].Name, hook.Name)
	assert.Equal(t, svcs[0].Namespace, hook.Namespace)
	assert.Equal(t, pod.Volumes[0].Secret.SecretName, svcs[0].Annotations["service.beta.openshift.io/serving-cert-secret-name"])

	mirrored := userKustomization(t, webhookOverlay, nil,
		"images:\n  - name: "+shippedImage+"\n    newName: registry.example.com/team/sriov-udn-binding\n    newTag: v0.1.0\n")
	assert.Equal(t, "registry.example.com/team/sriov-udn-binding:v0.1.0",
		ofKind[*appsv1.Deployment](build(t, mirrored))[0].Spec.Template.Spec.Containers[0].Image)
}

// OpenShift's restricted-v2 assigns the uid: overlays/hco-webhook drops the fixed one and keeps the rest, and
// points the migration opt-in at HCO's KubeVirt CR as overlays/hco does.
func TestHCOWebhook_NoFixedUID_MigrationParamAsHCO(t *testing.T) {
	objs := build(t, hcoWebhookOverlay)
	sc := ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.SecurityContext
	assert.Nil(t, sc.RunAsUser)
	assert.Nil(t, sc.RunAsGroup)
	assert.Equal(t, ptr.To(true), sc.RunAsNonRoot)
	paramRef := func(objs []runtime.Object) *admissionregistrationv1.ParamRef {
		for _, b := range ofKind[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs) {
			if b.Name == "sriov-udn-binding-vf-migration.kubevirt.io" {
				return b.Spec.ParamRef
			}
		}
		return nil
	}
	want := paramRef(build(t, filepath.Join(manifestsDir, "overlays", "hco")))
	require.NotNil(t, want)
	assert.Equal(t, want, paramRef(objs))
}

// cert-manager's variant: the CA is injected from the serving Certificate, whose Secret the Deployment mounts,
// and no OpenShift annotation is left.
func TestWebhookCertManager_InjectsTheCertificatesCA(t *testing.T) {
	objs := build(t, userKustomization(t, webhookOverlay, []string{certManager}, ""))
	hook := ofKind[*admissionregistrationv1.MutatingWebhookConfiguration](objs)[0]
	assert.Equal(t, "sriov-udn-binding/sriov-udn-binding-webhook", hook.Annotations["cert-manager.io/inject-ca-from"])
	assert.NotContains(t, hook.Annotations, "service.beta.openshift.io/inject-cabundle")
	assert.NotContains(t, ofKind[*corev1.Service](objs)[0].Annotations, "service.beta.openshift.io/serving-cert-secret-name")
	var certSecret string
	for _, o := range objs {
		if u, ok := o.(interface{ UnstructuredContent() map[string]any }); ok {
			m := u.UnstructuredContent()
			meta, _ := m["metadata"].(map[string]any)
			if m["kind"] == "Certificate" && meta["name"] == "sriov-udn-binding-webhook" {
				spec, _ := m["spec"].(map[string]any)
				certSecret, _ = spec["secretName"].(string)
			}
		}
	}
	assert.Equal(t, ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Volumes[0].Secret.SecretName, certSecret)
}
