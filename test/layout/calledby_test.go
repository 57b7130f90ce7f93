package layout

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

const module = "github.com/sriov-udn-binding/sriov-udn-binding"

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath string
	Dir        string
	Imports    []string
}

// packages lists the sidecar module's packages (tests left out: they may import what they like).
func packages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = harness.RepoRoot()
	out, err := cmd.Output()
	require.NoError(t, err, "go list in %s", cmd.Dir)
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// pathInModule matches a package of the module as the doc comments name it: cmd/... or pkg/....
var pathInModule = regexp.MustCompile(`\b(?:cmd|pkg)/[a-z0-9]+(?:/[a-z0-9]+)*\b`)

// calledBy returns the module packages named in the sentence of doc that starts "Called by", and whether
// there is one. The comment's line breaks are joined first; the sentence ends at the first ". " or at the end.
func calledBy(doc string) ([]string, bool) {
	var text strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "//"); ok {
			text.WriteString(strings.TrimSpace(rest) + " ")
		}
	}
	s := text.String()
	i := strings.Index(s, "Called by ")
	if i < 0 {
		return nil, false
	}
	sentence := s[i:]
	if j := strings.Index(sentence, ". "); j >= 0 {
		sentence = sentence[:j]
	}
	names := pathInModule.FindAllString(sentence, -1)
	slices.Sort(names)
	return slices.Compact(names), true
}

func TestCalledBy_ParsesTheSentence(t *testing.T) {
	got, ok := calledBy("// Package x does y. Called by cmd/sidecar (wiring) and\n// pkg/binding (the Handler, see pkg/hooks/limits.go)...\n// Not pkg/model. More.\npackage x\n")
	require.True(t, ok)
	assert.Equal(t, []string{"cmd/sidecar", "pkg/binding", "pkg/hooks/limits"}, got, "paths in the sentence only")
	_, ok = calledBy("// Package x.\npackage x\n")
	assert.False(t, ok)
}

// Every package's doc.go says who calls it, and says it right: the "Called by" sentence names exactly the
// module's packages whose non-test code imports it.
func TestDocGo_CalledByNamesExactlyTheImporters(t *testing.T) {
	pkgs := packages(t)
	require.NotEmpty(t, pkgs)
	importers := map[string][]string{}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				importers[rel] = append(importers[rel], strings.TrimPrefix(p.ImportPath, module+"/"))
			}
		}
	}
	checked := 0
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if rel == "cmd/sidecar" {
			continue // main: nobody imports it (cmd/sidecar/imports_test.go checks what it imports)
		}
		doc, err := os.ReadFile(filepath.Join(p.Dir, "doc.go"))
		require.NoError(t, err, "%s has no doc.go", rel)
		named, ok := calledBy(string(doc))
		if !assert.True(t, ok, "%s/doc.go has no \"Called by\" sentence", rel) {
			continue
		}
		want := slices.Clone(importers[rel])
		slices.Sort(want)
		assert.Equal(t, want, named, "%s/doc.go: \"Called by\" against go list's importers", rel)
		checked++
	}
	assert.GreaterOrEqual(t, checked, 11, "precondition: the module's packages were checked")
}
