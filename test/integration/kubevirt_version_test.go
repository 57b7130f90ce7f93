package integration

import (
	"os"
	"reflect"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/hooks"
)

// linkedVersion names the module version a function was compiled from, read from its source file path
// (GOMODCACHE/<module>@<version>/...): test binaries carry no module list in their build info.
func linkedVersion(t *testing.T, module string, fn any) string {
	t.Helper()
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	require.NotNil(t, f, "no symbol for a %s function", module)
	file, _ := f.FileLine(f.Entry())
	m := regexp.MustCompile(regexp.QuoteMeta(module) + `@(v[^/]+)/`).FindStringSubmatch(file)
	require.NotNil(t, m, "%s function compiled from %s, not from a module %s@version", module, file, module)
	return m[1]
}

// TestKubeVirtVersion_IsTheOneTheMatrixAsksFor proves the version matrix switches what is linked: `make
// test-integration` runs this module once per KubeVirt version (test/go.mod, then -modfile=go.kubevirt-V.mod)
// with KUBEVIRT_VERSION=V, and the hook Manager and the VMI types the tests link must come from V.
// Without KUBEVIRT_VERSION (a plain `go test`) it reports the versions and skips, saying why: there is
// nothing to compare them with.
func TestKubeVirtVersion_IsTheOneTheMatrixAsksFor(t *testing.T) {
	kubevirt := linkedVersion(t, "kubevirt.io/kubevirt", hooks.GetManager)
	api := linkedVersion(t, "kubevirt.io/api", v1.NewVMI)
	t.Logf("linked: kubevirt.io/kubevirt %s, kubevirt.io/api %s", kubevirt, api)

	want := os.Getenv("KUBEVIRT_VERSION")
	if want == "" {
		t.Skip("KUBEVIRT_VERSION is unset: nothing to compare the linked versions with; `make test-integration` sets it per version of the matrix")
	}
	assert.Equal(t, want, kubevirt, "kubevirt.io/kubevirt")
	assert.Equal(t, want, api, "kubevirt.io/api (replace pin)")
}
