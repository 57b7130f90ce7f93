package manifests_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// configurationDoc holds the one list of what a renamed image or binding touches.
var configurationDoc = filepath.Join("..", "..", "docs", "configuration.md")

// What names the image or the binding in a manifest line (comments apart): the image reference or the
// substring the policies find our container by; the binding as a quoted CEL string, a map key, a
// kustomize field path segment or an interface's binding name.
var (
	imageUse   = regexp.MustCompile(`ghcr\.io/sriov-udn-binding/sriov-udn-binding|contains\('sriov-udn-binding'\)`)
	bindingUse = regexp.MustCompile(`'sriov-udn'|/sriov-udn/|^\s*sriov-udn:\s*$|^\s*(- )?name:\s*sriov-udn\s*$`)
)

// filesUsing lists the files under manifests/ (kustomizations and transformer configurations included) with
// a non-comment line that re matches, relative to the repository root.
func filesUsing(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(manifestsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if re.MatchString(line) {
				rel, err := filepath.Rel(filepath.Join(manifestsDir, ".."), path)
				if err != nil {
					return err
				}
				out = append(out, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	require.NoError(t, err, "walk %s", manifestsDir)
	slices.Sort(out)
	return out
}

// listedFiles returns the files the table under the heading lists (its rows' first cells), in order.
func listedFiles(t *testing.T, doc, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(doc)
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n"+heading+"\n")
	require.True(t, found, "%s has no heading %q", doc, heading)
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	row := regexp.MustCompile("(?m)^\\| `(manifests/[^`]+)` \\|")
	var out []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out, "%s %q lists no file", doc, heading)
	return out
}

// The list in docs/configuration.md is the only one (manifests/README.md links to it): each table names
// exactly the files whose lines name the image or the binding, so a new policy matching our image, or a new
// path naming the binding, fails here until the list says so.
func TestRenameList_NamesEveryFileThatNamesTheImageOrTheBinding(t *testing.T) {
	for _, tc := range []struct {
		heading string
		use     *regexp.Regexp
	}{
		{"### A renamed image", imageUse},
		{"### A renamed binding", bindingUse},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			listed := listedFiles(t, configurationDoc, tc.heading)
			sorted := slices.Sorted(slices.Values(listed))
			require.Equal(t, slices.Compact(slices.Clone(sorted)), sorted, "%s %q lists a file twice", configurationDoc, tc.heading)
			require.Equal(t, filesUsing(t, tc.use), sorted,
				"%s %q must list exactly the manifests that name it (left: found in manifests/, right: listed)", configurationDoc, tc.heading)
		})
	}
}

// Every kustomize transformer configuration reaches sidecarImage through the binding's name, so the binding
// list must name each of them (the paths a rename breaks silently: the images: transformer stops reaching
// the field, and the image stays the default).
func TestRenameList_NamesEveryKustomizeconfigPath(t *testing.T) {
	listed := listedFiles(t, configurationDoc, "### A renamed binding")
	var configs []string
	err := filepath.WalkDir(manifestsDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "kustomizeconfig.yaml" {
			rel, err := filepath.Rel(filepath.Join(manifestsDir, ".."), path)
			configs = append(configs, filepath.ToSlash(rel))
			return err
		}
		return err
	})
	require.NoError(t, err)
	require.NotEmpty(t, configs)
	for _, c := range configs {
		require.Contains(t, listed, c)
	}
}

// manifests/README.md keeps no list of its own: it links to the one above.
func TestRenameList_ManifestsREADMELinksToIt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestsDir, "README.md"))
	require.NoError(t, err)
	readme := string(data)
	require.Contains(t, readme, "docs/configuration.md#renaming-the-image-or-the-binding")
	for _, list := range []string{"edit\n`podinfo-policy/mutating-policy.yaml`", "replace `'sriov-udn'` in\n`validating-policy.yaml`"} {
		require.NotContains(t, readme, list, "manifests/README.md lists files to edit again: link to docs/configuration.md instead")
	}
}
