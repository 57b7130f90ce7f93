package manifests_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var sidecarFlagsFile = filepath.Join("..", "..", "cmd", "sidecar", "flags.go")

// logLevelObjects decodes strictly the log-level policy docs/operations.md gives ("Log level": its one yaml
// block): the MutatingAdmissionPolicy, its binding and the ConfigMap.
func logLevelObjects(t *testing.T) (*admissionregistrationv1beta1.MutatingAdmissionPolicy, *admissionregistrationv1beta1.MutatingAdmissionPolicyBinding, *corev1.ConfigMap) {
	t.Helper()
	data, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n### Log level\n")
	require.True(t, found, "%s has no heading \"### Log level\"", operationsDoc)
	section, _, _ = strings.Cut(section, "\n### ")
	_, block, found := strings.Cut(section, "\n```yaml\n")
	require.True(t, found, "%s \"Log level\" has no yaml block", operationsDoc)
	block, _, found = strings.Cut(block, "\n```\n")
	require.True(t, found)
	docs, err := splitDocuments(operationsDoc, []byte(block))
	require.NoError(t, err)
	dec := strictDecoder(newScheme(t))
	var (
		policy  *admissionregistrationv1beta1.MutatingAdmissionPolicy
		binding *admissionregistrationv1beta1.MutatingAdmissionPolicyBinding
		cm      *corev1.ConfigMap
	)
	for _, d := range docs {
		o, _, err := decodeManifest(dec, d.data)
		require.NoError(t, err, "%s \"Log level\" document %d", operationsDoc, d.index)
		_, labels := labelsOf(t, o)
		assert.Equal(t, ourName, labels[labelName], "the log-level objects are ours: %T", o)
		assert.Equal(t, ourName, labels[labelPartOf], "the log-level objects are ours: %T", o)
		switch v := o.(type) {
		case *admissionregistrationv1beta1.MutatingAdmissionPolicy:
			policy = v
		case *admissionregistrationv1beta1.MutatingAdmissionPolicyBinding:
			binding = v
		case *corev1.ConfigMap:
			cm = v
		default:
			t.Fatalf("%s \"Log level\": unexpected %T", operationsDoc, o)
		}
	}
	require.NotNil(t, policy)
	require.NotNil(t, binding)
	require.NotNil(t, cm)
	return policy, binding, cm
}

// sidecarLogLevelEnv reads, from cmd/sidecar/flags.go, the environment twin of --log-level and the levels
// its help names.
func sidecarLogLevelEnv(t *testing.T) (string, []string) {
	t.Helper()
	data, err := os.ReadFile(sidecarFlagsFile)
	require.NoError(t, err)
	m := regexp.MustCompile(`"log-level", \w+, "log level: ([a-z, ]+) \(env ([A-Z_]+)\)"`).FindSubmatch(data)
	require.NotNil(t, m, "%s: the --log-level flag and its help (levels, env twin) are not where this test reads them", sidecarFlagsFile)
	return string(m[2]), strings.Split(string(m[1]), ", ")
}

// The log-level policy of docs/operations.md sets the sidecar's own environment twin of --log-level, from its ConfigMap, on the
// container podinfo-policy mounts pod-info into, and only to a level the sidecar accepts.
func TestLogLevel_PolicySetsTheSidecarsEnvFromItsConfigMap(t *testing.T) {
	env, levels := sidecarLogLevelEnv(t)
	policy, binding, cm := logLevelObjects(t)

	// The ConfigMap is the binding's param, and carries a level the sidecar accepts.
	require.NotNil(t, policy.Spec.ParamKind)
	assert.Equal(t, "v1", policy.Spec.ParamKind.APIVersion)
	assert.Equal(t, "ConfigMap", policy.Spec.ParamKind.Kind)
	require.NotNil(t, binding.Spec.ParamRef)
	assert.Equal(t, policy.Name, binding.Spec.PolicyName)
	assert.Equal(t, cm.Name, binding.Spec.ParamRef.Name)
	assert.Equal(t, cm.Namespace, binding.Spec.ParamRef.Namespace)
	require.NotNil(t, binding.Spec.ParamRef.ParameterNotFoundAction)
	assert.Equal(t, admissionregistrationv1beta1.AllowAction, *binding.Spec.ParamRef.ParameterNotFoundAction,
		"no ConfigMap: the pod is left at the image's level, never refused")
	require.Contains(t, cm.Data, env, "the ConfigMap's key is the sidecar's env twin of --log-level")
	assert.Contains(t, levels, cm.Data[env])

	// A pod the policy cannot mutate still starts.
	require.NotNil(t, policy.Spec.FailurePolicy)
	assert.Equal(t, admissionregistrationv1beta1.Ignore, *policy.Spec.FailurePolicy)

	// Its CEL reads that key, lets through exactly the levels the sidecar names, and sets that env.
	exprs := map[string]string{}
	for _, v := range policy.Spec.Variables {
		exprs[v.Name] = v.Expression
	}
	assert.Contains(t, exprs["level"], "params.?data.?"+env+".orValue('')")
	quoted := make([]string, len(levels))
	for i, l := range levels {
		var lv slog.Level
		require.NoError(t, lv.UnmarshalText([]byte(l)), "the sidecar parses its level with slog.Level.UnmarshalText")
		quoted[i] = "'" + l + "'"
	}
	assert.Equal(t, "variables.level in ["+strings.Join(quoted, ", ")+"]", exprs["valid"])
	require.Len(t, policy.Spec.Mutations, 1)
	require.NotNil(t, policy.Spec.Mutations[0].ApplyConfiguration)
	mutation := policy.Spec.Mutations[0].ApplyConfiguration.Expression
	assert.Contains(t, mutation, "env: [Object.spec.containers.env{name: '"+env+"', value: variables.level}]")
	assert.True(t, strings.HasPrefix(mutation, "variables.valid ? "), "only a valid level is set")

	// The container is the one podinfo-policy mutates, found the same way.
	podinfo := loadMAP(t, filepath.Join(manifestsDir, "podinfo-policy"))
	podinfoVars := map[string]string{}
	for _, v := range podinfo.Spec.Variables {
		podinfoVars[v.Name] = v.Expression
	}
	assert.Equal(t, podinfoVars["ourContainers"], exprs["ourContainers"])
	assert.Equal(t, podinfo.Spec.MatchConstraints, policy.Spec.MatchConstraints)
}

// loadMAP builds dir and returns its one MutatingAdmissionPolicy.
func loadMAP(t *testing.T, dir string) *admissionregistrationv1beta1.MutatingAdmissionPolicy {
	t.Helper()
	var out []runtime.Object
	for _, o := range build(t, dir) {
		if _, ok := o.(*admissionregistrationv1beta1.MutatingAdmissionPolicy); ok {
			out = append(out, o)
		}
	}
	require.Len(t, out, 1, "%s: MutatingAdmissionPolicies", dir)
	return out[0].(*admissionregistrationv1beta1.MutatingAdmissionPolicy)
}

// docs/operations.md's command edits the ConfigMap the policy reads.
func TestLogLevel_OperationsDocEditsThatConfigMap(t *testing.T) {
	env, _ := sidecarLogLevelEnv(t)
	_, _, cm := logLevelObjects(t)
	data, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	assert.Contains(t, string(data), "kubectl -n "+cm.Namespace+" patch configmap "+cm.Name+` --type merge -p '{"data":{"`+env+`":"debug"}}'`)
}
