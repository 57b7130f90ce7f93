package main

import (
	"go/build"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is this module's path (go.mod).
const module = "github.com/sriov-udn-binding/sriov-udn-binding"

// Issue 28: main owns flags, wiring, signals and printing; the work is pkg/'s, reached through three
// packages only. The steps' own packages (model, cloudinit, domain, netval, downwardapi, ifacecache)
// are pipeline's and binding's to call: importing one here is how render once composed the pipeline a
// second time.
func TestSidecarImports_OnlyPipelineHooksBindingAndItsOwn(t *testing.T) {
	allowed := []string{
		module + "/pkg/pipeline",
		module + "/pkg/hooks",
		module + "/pkg/binding",
		"go.yaml.in/yaml/v3", // render reads --pod and --vmi as YAML or JSON
	}
	pkg, err := build.Default.ImportDir(".", 0)
	require.NoError(t, err)
	require.NotEmpty(t, pkg.GoFiles, "precondition: the command's files were read")
	require.Contains(t, pkg.Imports, module+"/pkg/pipeline", "precondition: the real import list")
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		switch {
		case !strings.Contains(first, "."): // the standard library
		case strings.HasPrefix(imp, module+"/cmd/sidecar/internal/"):
		default:
			assert.True(t, slices.Contains(allowed, imp), "cmd/sidecar imports %s: reach it through pkg/pipeline, pkg/hooks or pkg/binding", imp)
		}
	}
}
