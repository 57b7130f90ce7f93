package main

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is this module's path (go.mod).
const module = "github.com/sriov-udn-binding/sriov-udn-binding"

// main owns flags, wiring, signals and printing; the work is pkg/'s, reached through pkg/pipeline, pkg/hooks
// and pkg/binding. The steps' own packages (model, cloudinit, domain, netval, downwardapi, ifacecache) are pipeline's and
// binding's to call: importing one here is how render once composed the pipeline a second time.
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

// The transport sits on top: pkg/hooks adapts KubeVirt's messages to a Handler that pkg/binding implements
// without importing it, so nothing but the command that wires them imports pkg/hooks (its own generated
// subpackages aside, which it imports).
func TestHooksImportedOnlyByTheCommand(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	hooks := module + "/pkg/hooks"
	checked := 0
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && dir != root {
			return filepath.SkipDir // another module
		}
		pkg, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			return nil // no Go files
		}
		rel, _ := filepath.Rel(root, dir)
		path := module + "/" + filepath.ToSlash(rel)
		checked++
		for _, imports := range [][]string{pkg.Imports, pkg.TestImports, pkg.XTestImports} {
			if path == module+"/cmd/sidecar" || path == hooks || strings.HasPrefix(path, hooks+"/") {
				continue
			}
			assert.NotContains(t, imports, hooks, "%s imports pkg/hooks: only cmd/sidecar may (pkg/hooks sits on top)", path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 10, "precondition: the module's packages were read")
}
