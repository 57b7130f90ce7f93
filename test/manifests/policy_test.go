package manifests_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

var (
	vmGVK  = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}
	vmGVR  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	vmiGVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstance"}
	vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
)

// policyOptions are the variables kube-apiserver declares for a ValidatingAdmissionPolicy without
// params (validating/plugin.go compilePolicy, StrictCostEnforcementForVAP on).
var policyOptions = plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true, StrictCost: true}

// compiledVAP is a policy compiled the way kube-apiserver v1.34 compiles it.
type compiledVAP struct {
	validator validating.Validator
}

// compileVAP mirrors k8s.io/apiserver validating/plugin.go compilePolicy (unexported), and fails the
// test on any compile error, which the apiserver would only report at admission time.
func compileVAP(t *testing.T, policy *admissionregistrationv1.ValidatingAdmissionPolicy) compiledVAP {
	t.Helper()
	env, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName,
		environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true))
	require.NoError(t, err)
	compiler := plugincel.NewCompositedCompilerFromTemplate(env)

	for _, v := range policy.Spec.Variables {
		res := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, policyOptions, environment.StoredExpressions)
		require.Nil(t, res.Error, "variable %s: %v", v.Name, res.Error)
	}
	var matcher matchconditions.Matcher
	if len(policy.Spec.MatchConditions) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(policy.Spec.MatchConditions))
		for i := range policy.Spec.MatchConditions {
			mc := (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i])
			res := compiler.CompileCELExpression(mc, policyOptions, environment.StoredExpressions)
			require.Nil(t, res.Error, "matchCondition %s: %v", mc.Name, res.Error)
			accessors[i] = mc
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(accessors, policyOptions, environment.StoredExpressions),
			policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	messageOptions := policyOptions
	messageOptions.HasAuthorizer = false
	for i, v := range policy.Spec.Validations {
		cond := &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		res := compiler.CompileCELExpression(cond, policyOptions, environment.StoredExpressions)
		require.Nil(t, res.Error, "validation %d: %v", i, res.Error)
		validations[i] = cond
		if v.MessageExpression != "" {
			msg := &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
			res := compiler.CompileCELExpression(msg, messageOptions, environment.StoredExpressions)
			require.Nil(t, res.Error, "messageExpression %d: %v", i, res.Error)
			messages[i] = msg
		}
	}
	return compiledVAP{validator: validating.NewValidator(
		compiler.CompileCondition(validations, policyOptions, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(nil, policyOptions, environment.StoredExpressions),
		compiler.CompileCondition(messages, messageOptions, environment.StoredExpressions),
		policy.Spec.FailurePolicy,
	)}
}

// verdict is the outcome for one object: denied (with the messages) or admitted; an evaluation
// error fails the test, since with failurePolicy Fail it would deny every such request.
type verdict struct {
	denied   bool
	messages []string
}

func (c compiledVAP) evaluate(t *testing.T, op admission.Operation, obj, old *unstructured.Unstructured) verdict {
	t.Helper()
	gvk, gvr := vmGVK, vmGVR
	if obj.GetKind() == "VirtualMachineInstance" {
		gvk, gvr = vmiGVK, vmiGVR
	}
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	attrs := admission.NewAttributesRecord(obj, oldObj, gvk, obj.GetNamespace(), obj.GetName(), gvr, "", op, nil, false,
		&user.DefaultInfo{Name: "test"})
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: obj, VersionedOldObject: oldObj}
	res := c.validator.Validate(context.Background(), gvr, versioned, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	var v verdict
	for _, d := range res.Decisions {
		require.NotEqual(t, validating.EvalError, d.Evaluation, "evaluation error: %s", d.Message)
		if d.Action == validating.ActionDeny {
			v.denied = true
			v.messages = append(v.messages, d.Message)
		}
	}
	return v
}

func loadPolicies(t *testing.T) (main, memlock *admissionregistrationv1.ValidatingAdmissionPolicy) {
	t.Helper()
	for _, o := range loadFile(t, filepath.Join(manifestsDir, "policy", "validating-policy.yaml")) {
		p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		switch p.Name {
		case "sriov-udn-binding.kubevirt.io":
			main = p
		case "sriov-udn-binding-memlock.kubevirt.io":
			memlock = p
		}
	}
	require.NotNil(t, main)
	require.NotNil(t, memlock)
	return main, memlock
}

// exampleVM is manifests/examples/vm.yaml, which must itself be admitted.
func exampleVM(t *testing.T) *unstructured.Unstructured {
	return loadUnstructured(t, filepath.Join(manifestsDir, "examples", "vm.yaml"))
}

// vmiFrom turns a VM into the VMI its controller would create (same spec as the template).
func vmiFrom(t *testing.T, vm *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	spec, found, err := unstructured.NestedMap(vm.Object, "spec", "template", "spec")
	require.NoError(t, err)
	require.True(t, found)
	vmi := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	vmi.SetGroupVersionKind(vmiGVK)
	vmi.SetName(vm.GetName())
	vmi.SetNamespace(vm.GetNamespace())
	return vmi
}

// specOf returns the path prefix of the VMI spec inside obj.
func specOf(obj *unstructured.Unstructured) []string {
	if obj.GetKind() == "VirtualMachineInstance" {
		return []string{"spec"}
	}
	return []string{"spec", "template", "spec"}
}

func setField(t *testing.T, obj *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	require.NoError(t, unstructured.SetNestedField(obj.Object, value, append(specOf(obj), path...)...))
}

func removeField(obj *unstructured.Unstructured, path ...string) {
	unstructured.RemoveNestedField(obj.Object, append(specOf(obj), path...)...)
}

// keepVolumes keeps only the volumes for which keep is true.
func keepVolumes(t *testing.T, obj *unstructured.Unstructured, keep func(map[string]any) bool) {
	t.Helper()
	vols, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "volumes")...)
	require.NoError(t, err)
	var out []any
	for _, v := range vols {
		if keep(v.(map[string]any)) {
			out = append(out, v)
		}
	}
	setField(t, obj, out, "volumes")
}

func withoutCloudInit(t *testing.T, obj *unstructured.Unstructured) {
	keepVolumes(t, obj, func(v map[string]any) bool {
		_, noCloud := v["cloudInitNoCloud"]
		_, configDrive := v["cloudInitConfigDrive"]
		return !noCloud && !configDrive
	})
}

func withConfigDrive(t *testing.T, obj *unstructured.Unstructured) {
	withoutCloudInit(t, obj)
	vols, _, _ := unstructured.NestedSlice(obj.Object, append(specOf(obj), "volumes")...)
	vols = append(vols, map[string]any{"name": "cloudinitdisk", "cloudInitConfigDrive": map[string]any{"userData": "#cloud-config\n"}})
	setField(t, obj, vols, "volumes")
}

// withInterfaces replaces every binding interface by the given binding (or core bridge when "").
func withBinding(t *testing.T, obj *unstructured.Unstructured, name string) {
	t.Helper()
	ifaces, _, err := unstructured.NestedSlice(obj.Object, append(specOf(obj), "domain", "devices", "interfaces")...)
	require.NoError(t, err)
	for _, i := range ifaces {
		m := i.(map[string]any)
		if _, ok := m["binding"]; !ok {
			continue
		}
		delete(m, "binding")
		if name == "" {
			m["bridge"] = map[string]any{}
		} else {
			m["binding"] = map[string]any{"name": name}
		}
	}
	setField(t, obj, ifaces, "domain", "devices", "interfaces")
}

func TestValidatingPolicy_Verdicts(t *testing.T) {
	mainPolicy, _ := loadPolicies(t)
	vap := compileVAP(t, mainPolicy)

	type mutation func(t *testing.T, obj *unstructured.Unstructured)
	eviction := func(v string) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { setField(t, obj, v, "evictionStrategy") }
	}
	noEviction := func(_ *testing.T, obj *unstructured.Unstructured) { removeField(obj, "evictionStrategy") }
	binding := func(name string) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { withBinding(t, obj, name) }
	}
	noInterfaces := func(_ *testing.T, obj *unstructured.Unstructured) {
		removeField(obj, "domain", "devices", "interfaces")
	}

	cases := []struct {
		name       string
		mutate     []mutation
		wantDenied bool
		wantInMsg  []string
	}{
		{name: "the shipped example VM is admitted"},
		{name: "config drive instead of NoCloud is admitted", mutate: []mutation{withConfigDrive}},
		{name: "evictionStrategy External is admitted", mutate: []mutation{eviction("External")}},
		{name: "no cloud-init volume is denied", mutate: []mutation{withoutCloudInit}, wantDenied: true,
			wantInMsg: []string{"cloudInitNoCloud or cloudInitConfigDrive", "PreCloudInitIso"}},
		{name: "LiveMigrate is denied", mutate: []mutation{eviction("LiveMigrate")}, wantDenied: true,
			wantInMsg: []string{"evictionStrategy must be set to None", "loses that NIC"}},
		{name: "LiveMigrateIfPossible is denied", mutate: []mutation{eviction("LiveMigrateIfPossible")}, wantDenied: true,
			wantInMsg: []string{"evictionStrategy"}},
		{name: "no evictionStrategy is denied since the cluster default may be LiveMigrate", mutate: []mutation{noEviction},
			wantDenied: true, wantInMsg: []string{"cluster-wide default"}},
		{name: "both problems give both messages", mutate: []mutation{withoutCloudInit, eviction("LiveMigrate")}, wantDenied: true,
			wantInMsg: []string{"cloudInitNoCloud", "evictionStrategy"}},
		{name: "a VM without our binding is not our business", mutate: []mutation{binding(""), withoutCloudInit, eviction("LiveMigrate")}},
		{name: "a VM with another binding plugin is not our business", mutate: []mutation{binding("passt"), withoutCloudInit, eviction("LiveMigrate")}},
		{name: "a VM without interfaces is not our business", mutate: []mutation{noInterfaces, withoutCloudInit}},
	}
	for _, kind := range []string{"VirtualMachine", "VirtualMachineInstance"} {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				obj := exampleVM(t)
				if kind == "VirtualMachineInstance" {
					obj = vmiFrom(t, obj)
				}
				for _, m := range tc.mutate {
					m(t, obj)
				}
				got := vap.evaluate(t, admission.Create, obj, nil)
				assert.Equal(t, tc.wantDenied, got.denied, "messages: %v", got.messages)
				for _, want := range tc.wantInMsg {
					assert.Contains(t, joinMessages(got.messages), want)
				}
				if kind == "VirtualMachineInstance" && tc.wantDenied {
					assert.Contains(t, joinMessages(got.messages), "VirtualMachineInstance vm-sriov-udn: ")
					assert.NotContains(t, joinMessages(got.messages), "spec.template.spec")
				}
				if kind == "VirtualMachine" && tc.wantDenied {
					assert.Contains(t, joinMessages(got.messages), "spec.template.spec.")
				}
			})
		}
	}
}

func TestValidatingPolicy_VMUpdates(t *testing.T) {
	mainPolicy, _ := loadPolicies(t)
	vap := compileVAP(t, mainPolicy)

	// A VM created before the policy existed, violating it.
	legacy := exampleVM(t)
	withoutCloudInit(t, legacy)

	t.Run("an update that leaves the template alone is admitted", func(t *testing.T) {
		updated := legacy.DeepCopy()
		require.NoError(t, unstructured.SetNestedField(updated.Object, "Halted", "spec", "runStrategy"))
		updated.SetFinalizers([]string{"kubevirt.io/virtualMachineControllerFinalize"})
		assert.False(t, vap.evaluate(t, admission.Update, updated, legacy).denied)
	})
	t.Run("an update that changes the template must satisfy the policy", func(t *testing.T) {
		updated := legacy.DeepCopy()
		setField(t, updated, "LiveMigrate", "evictionStrategy")
		got := vap.evaluate(t, admission.Update, updated, legacy)
		assert.True(t, got.denied)
		assert.Contains(t, joinMessages(got.messages), "cloudInitNoCloud")
	})
	t.Run("an update that adds our binding to a VM without cloud-init is denied", func(t *testing.T) {
		old := exampleVM(t)
		withBinding(t, old, "")
		withoutCloudInit(t, old)
		updated := exampleVM(t)
		withoutCloudInit(t, updated)
		assert.True(t, vap.evaluate(t, admission.Update, updated, old).denied)
	})
}

func TestMemlockPolicy_WarnsOnlyWhenMemLockIsNotRequired(t *testing.T) {
	_, memlockPolicy := loadPolicies(t)
	vap := compileVAP(t, memlockPolicy)

	assert.False(t, vap.evaluate(t, admission.Create, exampleVM(t), nil).denied, "example VM sets memLock: Required")

	noLock := exampleVM(t)
	removeField(noLock, "domain", "memory", "reservedOverhead")
	got := vap.evaluate(t, admission.Create, noLock, nil)
	assert.True(t, got.denied)
	assert.Contains(t, joinMessages(got.messages), "memLock: Required")

	other := exampleVM(t)
	removeField(other, "domain", "memory")
	withBinding(t, other, "")
	assert.False(t, vap.evaluate(t, admission.Create, other, nil).denied)

	// The binding only warns: the kind e2e stand-in (no VF) has no memLock and must still start.
	for _, o := range loadFile(t, filepath.Join(manifestsDir, "policy", "validating-policy.yaml")) {
		if b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok && b.Spec.PolicyName == memlockPolicy.Name {
			assert.NotContains(t, b.Spec.ValidationActions, admissionregistrationv1.Deny)
			assert.Contains(t, b.Spec.ValidationActions, admissionregistrationv1.Warn)
		}
	}
}

func TestValidatingPolicy_AdmitsTheE2EVM(t *testing.T) {
	mainPolicy, _ := loadPolicies(t)
	vm := loadUnstructured(t, filepath.Join(e2eTestdataDir, "vm.yaml"))
	assert.False(t, compileVAP(t, mainPolicy).evaluate(t, admission.Create, vm, nil).denied)
	assert.False(t, compileVAP(t, mainPolicy).evaluate(t, admission.Create, vmiFrom(t, vm), nil).denied)
}

func joinMessages(msgs []string) string {
	out := ""
	for _, m := range msgs {
		out += m + "\n"
	}
	return out
}
