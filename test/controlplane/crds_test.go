package controlplane_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"kubevirt.io/kubevirt/pkg/virt-operator/resource/generate/components"
	"sigs.k8s.io/yaml"
)

// nadModule is the Go module that ships the NetworkAttachmentDefinition CRD (artifacts/networks-crd.yaml).
const nadModule = "github.com/k8snetworkplumbingwg/network-attachment-definition-client"

// crdTestdata holds the CRDs of projects that publish no Go module the test module can require: OVN-Kubernetes'
// UserDefinedNetwork and ClusterUserDefinedNetwork, and the SR-IOV Network Operator's SriovNetworkNodePolicy,
// as their repositories ship them (testdata/crds/README.md names the commits).
var crdTestdata = filepath.Join("testdata", "crds")

// crds returns the CRDs the manifests need, from the projects that own them: KubeVirt's as virt-operator
// generates them (with their OpenAPI validation schemas), the NetworkAttachmentDefinition CRD of the
// network-plumbing-wg client module, and those of crdTestdata, which the User Defined Network examples use.
func crds(t *testing.T) []*extv1.CustomResourceDefinition {
	t.Helper()
	var out []*extv1.CustomResourceDefinition
	for _, gen := range []func() (*extv1.CustomResourceDefinition, error){
		components.NewKubeVirtCrd,
		components.NewVirtualMachineCrd,
		components.NewVirtualMachineInstanceCrd,
		components.NewVirtualMachineInstanceMigrationCrd,
	} {
		crd, err := gen()
		require.NoError(t, err)
		out = append(out, crd)
	}
	// The module's directory, as the go command resolved it for this test binary's go.mod.
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", nadModule).Output()
	require.NoError(t, err, "go list -m %s", nadModule)
	files := []string{filepath.Join(strings.TrimSpace(string(dir)), "artifacts", "networks-crd.yaml")}
	testdata, err := filepath.Glob(filepath.Join(crdTestdata, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, testdata, 4, "the CRDs of %s", crdTestdata)
	for _, file := range append(files, testdata...) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		crd := &extv1.CustomResourceDefinition{}
		require.NoError(t, yaml.UnmarshalStrict(data, crd), file)
		out = append(out, crd)
	}
	return out
}

// installCRDs creates the CRDs and waits until the server reports each one Established (served).
func installCRDs(t *testing.T, c *cluster) {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(c.config)
	require.NoError(t, err)
	ctx := context.Background()
	for _, crd := range crds(t) {
		installCRD(t, ctx, client, crd)
	}
}

// installCRD creates crd and waits until the server reports it Established (served).
func installCRD(t *testing.T, ctx context.Context, client apiextensionsclient.Interface, crd *extv1.CustomResourceDefinition) {
	t.Helper()
	_, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err, "create CRD %s", crd.Name)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == extv1.Established && cond.Status == extv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "CRD %s never became Established", crd.Name)
}
