package manifests_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	labelName   = "app.kubernetes.io/name"
	labelPartOf = "app.kubernetes.io/part-of"
	ourName     = "sriov-udn-binding"
	// The examples are labelled apart, so that the install's prune and uninstall never reach a workload.
	exampleName   = "sriov-udn-binding-example"
	examplePartOf = "sriov-udn-binding-examples"
)

var installDoc = filepath.Join("..", "..", "docs", "install.md")

// exampleDirs are the example kustomizations under manifests/: the networks as NADs, as User Defined
// Networks, and a primary-UDN namespace.
var exampleDirs = []string{"examples", filepath.Join("examples", "udn"), filepath.Join("examples", "udn-primary")}

// notOurs are the kinds an entry point carries only one entry of: they must never carry our labels, since
// the uninstall deletes by them.
var notOurs = map[string]bool{"KubeVirt": true, "HyperConverged": true}

// labelledEntryPoints is every kustomization an operator applies: each entry point, alone and with the
// Kubernetes 1.34-1.35 component.
func labelledEntryPoints(t *testing.T) map[string]string {
	t.Helper()
	k134 := filepath.Join(manifestsDir, "components", "kubernetes-1.34-1.35")
	out := map[string]string{}
	for _, dir := range []string{
		manifestsDir,
		filepath.Join(manifestsDir, "overlays", "stock"),
		filepath.Join(manifestsDir, "overlays", "pod-info"),
		filepath.Join(manifestsDir, "overlays", "plugin"),
		filepath.Join(manifestsDir, "overlays", "hco"),
		filepath.Join(manifestsDir, "overlays", "e2e"),
		filepath.Join(manifestsDir, "overlays", "webhook"),
		filepath.Join(manifestsDir, "overlays", "hco-webhook"),
	} {
		out[dir] = dir
		out[dir+" + kubernetes-1.34-1.35"] = userKustomization(t, dir, []string{k134}, "")
	}
	return out
}

func labelsOf(t *testing.T, o runtime.Object) (string, map[string]string) {
	t.Helper()
	acc, err := meta.Accessor(o)
	require.NoError(t, err)
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + acc.GetName(), acc.GetLabels()
}

func TestLabels_EveryObjectOfEveryEntryPointIsOurs_ButTheCRsWeOnlyAddTo(t *testing.T) {
	for name, dir := range labelledEntryPoints(t) {
		t.Run(name, func(t *testing.T) {
			objs := build(t, dir)
			require.NotEmpty(t, objs)
			for _, o := range objs {
				id, labels := labelsOf(t, o)
				if notOurs[o.GetObjectKind().GroupVersionKind().Kind] {
					assert.NotContains(t, labels, labelName, "%s is not ours: a delete by label must never reach it", id)
					assert.NotContains(t, labels, labelPartOf, "%s is not ours: a delete by label must never reach it", id)
					continue
				}
				assert.Equal(t, ourName, labels[labelName], "%s: %s", id, labelName)
				assert.Equal(t, ourName, labels[labelPartOf], "%s: %s", id, labelPartOf)
			}
		})
	}
}

func TestLabels_ExamplesAreLabelledApart(t *testing.T) {
	for _, dir := range exampleDirs {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, filepath.Join(manifestsDir, dir))
			require.NotEmpty(t, objs)
			for _, o := range objs {
				id, labels := labelsOf(t, o)
				assert.Equal(t, exampleName, labels[labelName], "%s: %s", id, labelName)
				assert.Equal(t, examplePartOf, labels[labelPartOf], "%s: %s", id, labelPartOf)
			}
		})
	}
}

// docSection returns the text of a "## " section of a page.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	data, err := os.ReadFile(doc)
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n"+heading+"\n")
	require.True(t, found, "%s has no heading %q", doc, heading)
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// shippedKinds lists, by kind, the group/versions of every object of ours the entry points ship.
func shippedKinds(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, dir := range labelledEntryPoints(t) {
		for _, o := range build(t, dir) {
			gvk := o.GetObjectKind().GroupVersionKind()
			if notOurs[gvk.Kind] {
				continue
			}
			gv := gvk.GroupVersion().String()
			if gvk.Group == "" {
				gv = "core/" + gvk.Version
			}
			if out[gvk.Kind] == nil {
				out[gvk.Kind] = map[string]bool{}
			}
			out[gvk.Kind][gv] = true
		}
	}
	require.NotEmpty(t, out)
	return out
}

// resourceOf is the plural resource name kubectl takes for a kind.
func resourceOf(kind string) string {
	k := strings.ToLower(kind)
	if strings.HasSuffix(k, "y") {
		return strings.TrimSuffix(k, "y") + "ies"
	}
	return k + "s"
}

// The uninstall deletes every kind of ours by our label, and the upgrade prunes every kind of ours: a kind a
// new version ships that the commands do not name would be left behind.
func TestLabels_InstallDocUpgradePrunesAndUninstallDeletesEveryKindOfOurs(t *testing.T) {
	kinds := shippedKinds(t)
	selector := labelPartOf + "=" + ourName
	upgrade := docSection(t, installDoc, "## Upgrade")
	uninstall := docSection(t, installDoc, "## Uninstall")
	require.Contains(t, upgrade, "ours="+selector)
	require.Contains(t, upgrade, `--prune -l "$ours"`)
	require.Contains(t, uninstall, "ours="+selector)

	deleteLine := regexp.MustCompile(`(?m)^kubectl delete ([a-z.,]+)( -A)? -l "\$ours"$`)
	deleted := map[string]bool{}
	for _, m := range deleteLine.FindAllStringSubmatch(uninstall, -1) {
		for r := range strings.SplitSeq(m[1], ",") {
			deleted[strings.SplitN(r, ".", 2)[0]] = true
		}
	}
	for kind, gvs := range kinds {
		assert.True(t, deleted[resourceOf(kind)], "docs/install.md \"Uninstall\" deletes no %s by our label", kind)
		for gv := range gvs {
			entry := "--prune-allowlist=" + gv + "/" + kind
			if strings.HasPrefix(kind, "MutatingAdmissionPolicy") {
				// One command for 1.36+ (v1) and 1.34-1.35 (v1beta1): the page sets $map.
				entry = `--prune-allowlist="$map/` + kind + `"`
			}
			assert.Contains(t, upgrade, entry, "docs/install.md \"Upgrade\" does not prune %s %s", gv, kind)
		}
	}
}
