package main

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is this module's path (go.mod).
const module = "github.com/sriov-udn-binding/sriov-udn-binding"

// main owns flags, wiring, signals and printing; the work is pkg/'s, reached through pkg/pipeline, pkg/hooks
// and pkg/binding. The steps' own packages (cloudinit, domain, netval, ifacecache) are pipeline's and
// binding's to call: importing one here is how render once composed the pipeline a second time. model and
// downwardapi are imported for the values the pipeline takes (valueUses says which), never to run a step.
func TestSidecarImports_OnlyPipelineHooksBindingTheirValuesAndItsOwn(t *testing.T) {
	allowed := []string{
		module + "/pkg/pipeline",
		module + "/pkg/hooks",
		module + "/pkg/binding",
		module + "/pkg/model",
		module + "/pkg/downwardapi",
		module + "/pkg/admission", // the webhook subcommand serves its handler
		"go.yaml.in/yaml/v3",      // render reads --pod and --vmi as YAML or JSON
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

// What cmd/sidecar may name in model and downwardapi: the inputs it decodes for render and hands to the
// pipeline, and the options it wires. Nothing there runs a step.
var valueUses = map[string][]string{
	"model":       {"VirtualMachineInstance", "DecodeVMI", "Options"},
	"downwardapi": {"Snapshot", "SnapshotFromMaps"},
}

func TestSidecarImports_ModelAndDownwardAPI_OnlyForTheValuesThePipelineTakes(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	require.NoError(t, err)
	fset := token.NewFileSet()
	seen := 0
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		local := map[string]string{} // the file's name for each of the two packages
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for short := range valueUses {
				if path == module+"/pkg/"+short {
					local[short] = short
					if imp.Name != nil {
						local[imp.Name.Name] = short
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok {
				if short, ok := local[id.Name]; ok {
					seen++
					assert.Contains(t, valueUses[short], sel.Sel.Name, "%s: cmd/sidecar uses %s.%s: reach it through pkg/pipeline or pkg/binding",
						fset.Position(sel.Pos()), short, sel.Sel.Name)
				}
			}
			return true
		})
	}
	require.NotZero(t, seen, "precondition: the command names model or downwardapi values")
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
