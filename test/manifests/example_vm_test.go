package manifests_test

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var exampleVMFile = filepath.Join(manifestsDir, "examples", "vm.yaml")

// vmPolicyClaim is how manifests/examples/vm.yaml's comments say what a policy does when the VM lacks an
// item: "[<policy>: Deny]" or "[<policy>: Warn]".
var vmPolicyClaim = regexp.MustCompile(`^#.*\[([a-z0-9.-]+\.kubevirt\.io): (Deny|Warn)\]`)

// validatingBindings reads every ValidatingAdmissionPolicyBinding of a manifest file, by name.
func validatingBindings(t *testing.T, file string) map[string]admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	docs, err := splitDocuments(file, data)
	require.NoError(t, err)
	out := map[string]admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, d := range docs {
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		require.NoError(t, yaml.Unmarshal(d.data, &b))
		if b.Kind == "ValidatingAdmissionPolicyBinding" {
			out[b.Name] = b
		}
	}
	return out
}

// The example's comments name, for each item the policies ask of a VM, the policy and whether it denies or
// warns: each claim must be that policy binding's action, and every VM check of policy/validating-policy.yaml
// must be named.
func TestExampleVM_CommentsSayWhatEachPolicyDoes(t *testing.T) {
	data, err := os.ReadFile(exampleVMFile)
	require.NoError(t, err)
	bindings := validatingBindings(t, filepath.Join(manifestsDir, "policy", "validating-policy.yaml"))
	require.NotEmpty(t, bindings)
	claimed := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		m := vmPolicyClaim.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		policy, action := m[1], admissionregistrationv1.ValidationAction(m[2])
		claimed[policy] = true
		b, ok := bindings[policy]
		if !assert.True(t, ok, "vm.yaml cites %s, which policy/validating-policy.yaml does not bind", policy) {
			continue
		}
		assert.Contains(t, b.Spec.ValidationActions, action, "vm.yaml says %s does %s", policy, action)
		if action == admissionregistrationv1.Warn {
			assert.NotContains(t, b.Spec.ValidationActions, admissionregistrationv1.Deny, "vm.yaml says %s only warns", policy)
		}
	}
	for name := range bindings {
		assert.True(t, claimed[name], "vm.yaml does not say what %s asks of the VM", name)
	}
}

// exampleVMSpec is the example's VMI template.
func exampleVMSpec(t *testing.T) kubevirtv1.VirtualMachineInstanceSpec {
	t.Helper()
	data, err := os.ReadFile(exampleVMFile)
	require.NoError(t, err)
	var vm kubevirtv1.VirtualMachine
	require.NoError(t, yaml.UnmarshalStrict(data, &vm))
	require.NotNil(t, vm.Spec.Template)
	return vm.Spec.Template.Spec
}

// The comments say the masquerade pod NIC needs neither macAddress nor networkData (a NIC of another binding
// does), and that the macAddress is there only for the networkData that matches it. Each half is checked
// where it is decided: the pod NIC policy leaves masquerade and bridge alone, the sidecar's FindPodNIC serves
// them without a MAC and marks every other binding unservable, and the example's networkData matches the MAC.
func TestExampleVM_PodNICClaimsMatchThePolicyAndTheCode(t *testing.T) {
	spec := exampleVMSpec(t)
	var podNet string
	for _, n := range spec.Networks {
		if n.Pod != nil {
			podNet = n.Name
		}
	}
	require.NotEmpty(t, podNet, "the example has a pod network")
	idx := slices.IndexFunc(spec.Domain.Devices.Interfaces, func(i kubevirtv1.Interface) bool { return i.Name == podNet })
	require.GreaterOrEqual(t, idx, 0)
	nic := spec.Domain.Devices.Interfaces[idx]
	require.NotNil(t, nic.Masquerade, "vm.yaml says its pod NIC is masquerade (\"as here\")")

	// The networkData, which the comment says matches the pod NIC by its macAddress.
	var networkData string
	for _, v := range spec.Volumes {
		if v.CloudInitNoCloud != nil {
			networkData = v.CloudInitNoCloud.NetworkData
		}
	}
	require.NotEmpty(t, networkData)
	assert.Contains(t, networkData, `mac_address: "`+nic.MacAddress+`"`, "the networkData matches the pod NIC by its macAddress")

	// The policy: the pod NIC variable skips masquerade and bridge.
	policies := map[string]admissionregistrationv1.ValidatingAdmissionPolicy{}
	file := filepath.Join(manifestsDir, "policy", "validating-policy.yaml")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	docs, err := splitDocuments(file, data)
	require.NoError(t, err)
	for _, d := range docs {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		require.NoError(t, yaml.Unmarshal(d.data, &p))
		if p.Kind == "ValidatingAdmissionPolicy" {
			policies[p.Name] = p
		}
	}
	podNICPolicy, ok := policies["sriov-udn-binding-pod-nic-mac.kubevirt.io"]
	require.True(t, ok)
	var without string
	for _, v := range podNICPolicy.Spec.Variables {
		if v.Name == "podNICsWithoutMAC" {
			without = v.Expression
		}
	}
	assert.Contains(t, without, "!has(i.masquerade) && !has(i.bridge)", "the pod NIC policy denies only NICs that are neither masquerade nor bridge")

	// The sidecar: FindPodNIC marks a NIC unservable exactly when it is neither masquerade nor bridge.
	assert.True(t, unservableUnlessMasqueradeOrBridge(t, filepath.Join("..", "..", "pkg", "model", "podnic.go")),
		"pkg/model/podnic.go FindPodNIC: the branch that sets Unservable must be `iface.Masquerade == nil && iface.Bridge == nil`;"+
			" if the sidecar's rule changed, vm.yaml's pod NIC comment must change with it")
}

// unservableUnlessMasqueradeOrBridge reports whether FindPodNIC in file has an if statement whose condition
// is `iface.Masquerade == nil && iface.Bridge == nil` and whose body sets Unservable.
func unservableUnlessMasqueradeOrBridge(t *testing.T, file string) bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	require.NoError(t, err)
	found := false
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "FindPodNIC" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			ifs, ok := n.(*ast.IfStmt)
			if !ok {
				return true
			}
			var cond strings.Builder
			if err := printer.Fprint(&cond, fset, ifs.Cond); err != nil || cond.String() != "iface.Masquerade == nil && iface.Bridge == nil" {
				return true
			}
			ast.Inspect(ifs.Body, func(m ast.Node) bool {
				if sel, ok := m.(*ast.SelectorExpr); ok && sel.Sel.Name == "Unservable" {
					found = true
				}
				return true
			})
			return true
		})
	}
	return found
}
