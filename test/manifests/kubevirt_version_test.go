package manifests_test

import (
	"os"
	"reflect"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"
)

// TestKubeVirtAPIVersion_IsTheOneTheMatrixAsksFor proves `make test-manifests` decodes the manifests and
// evaluates the policies with the kubevirt.io/api version it names: with KUBEVIRT_VERSION=V, the VMI
// and KubeVirt types linked must come from V (read from the source path of one of its functions: test
// binaries carry no module list). Without KUBEVIRT_VERSION it reports the version and skips, saying why.
func TestKubeVirtAPIVersion_IsTheOneTheMatrixAsksFor(t *testing.T) {
	f := runtime.FuncForPC(reflect.ValueOf(kvv1.NewVMI).Pointer())
	require.NotNil(t, f)
	file, _ := f.FileLine(f.Entry())
	m := regexp.MustCompile(`kubevirt\.io/api@(v[^/]+)/`).FindStringSubmatch(file)
	require.NotNil(t, m, "kubevirt.io/api compiled from %s, not from a module version", file)
	t.Logf("linked: kubevirt.io/api %s", m[1])
	want := os.Getenv("KUBEVIRT_VERSION")
	if want == "" {
		t.Skip("KUBEVIRT_VERSION is unset: nothing to compare the linked version with; `make test-manifests` sets it per version of the matrix")
	}
	assert.Equal(t, want, m[1])
}
