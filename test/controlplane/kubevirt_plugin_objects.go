//go:build ignore

// kubevirt_plugin_objects prints, as one JSON object, the Plugin API objects virt-operator of the KubeVirt
// release in the module graph generates: the Plugin CRD and KubeVirt's own admission policies for plugins
// (validatingadmissionpolicy_plugin.go, validatingadmissionpolicy_sidecar.go), each with its binding.
//
// It is a program, not a test file, because those packages exist from KubeVirt v1.9.0 on and test/go.mod
// pins v1.8.4 (`go mod tidy` reads every build tag but "ignore"). plugin_test.go runs it, from test/, with the
// v1.9.0 modfile: go run -modfile=<that modfile> controlplane/kubevirt_plugin_objects.go
package main

import (
	"encoding/json"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	vap "kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components/validatingadmissionpolicies"
)

type objects struct {
	CRD      *extv1.CustomResourceDefinition                             `json:"crd"`
	Policies []*admissionregistrationv1.ValidatingAdmissionPolicy        `json:"policies"`
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding `json:"bindings"`
}

func main() {
	crd, err := components.NewPluginCrd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewPluginCrd:", err)
		os.Exit(1)
	}
	out := objects{
		CRD: crd,
		Policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{
			vap.NewPluginValidatingAdmissionPolicy(),
			vap.NewPluginWarningAdmissionPolicy(),
			vap.NewSidecarSubPathValidatingAdmissionPolicy(),
			vap.NewPluginSocketPathValidatingAdmissionPolicy(),
		},
		Bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			vap.NewPluginValidatingAdmissionPolicyBinding(),
			vap.NewPluginWarningAdmissionPolicyBinding(),
			vap.NewSidecarSubPathValidatingAdmissionPolicyBinding(),
			vap.NewPluginSocketPathValidatingAdmissionPolicyBinding(),
		},
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "encode:", err)
		os.Exit(1)
	}
}
