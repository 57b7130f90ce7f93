package controlplane_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The docs' shell blocks are the commands an operator types. Each is marked by the HTML comment on the line
// before its fence (docs/development.md "The docs test"):
//
//	<!-- docs-test: here -->          run by TestDocs_HereBlocksRun, in a copy of the repository
//	<!-- docs-test: controlplane -->  run by TestControlPlane against the real kube-apiserver, in page order
//	<!-- docs-test: cluster -->       needs a live cluster, a registry or a node: bash -n only
//	<!-- docs-test: ci -->            what CI runs (make test): each command must be one .ci/run runs
//
// controlplane-1.34 and controlplane-1.36 are controlplane blocks for that Kubernetes version only.
// controlplane-uninstall blocks run once the suite is done with the install (testUninstall);
// controlplane-hco blocks run against a HyperConverged CR on the 1.36 server (testHCORegistration).
const (
	markHere         = "here"
	markControlPlane = "controlplane"
	markCluster      = "cluster"
	markCI           = "ci"
)

var docsMark = regexp.MustCompile(`^<!-- docs-test: ([a-z0-9.-]+) -->$`)

// shellBlock is one fenced shell block of a doc page.
type shellBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence, 1-based
	mark string // the docs-test mark, "" when there is none
	text string // the block's lines, de-indented to the fence's indentation
}

func (b shellBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// docPages are the pages whose shell blocks are tested: the README, every page of docs/, the manifests'
// README and the changelog.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CHANGELOG.md", filepath.Join("manifests", "README.md")}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, more, "no docs/*.md")
	for _, p := range more {
		rel, err := filepath.Rel(repoRoot, p)
		require.NoError(t, err)
		pages = append(pages, rel)
	}
	sort.Strings(pages)
	return pages
}

// shellBlocks returns every fenced shell block (sh, bash, shell) of the pages, in page order.
func shellBlocks(t *testing.T, pages ...string) []shellBlock {
	t.Helper()
	fence := regexp.MustCompile("^(\\s*)```+\\s*(\\S*)")
	var out []shellBlock
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			m := fence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			indent, lang := m[1], m[2]
			end := i + 1
			for end < len(lines) && !regexp.MustCompile("^\\s*```").MatchString(lines[end]) {
				end++
			}
			require.Less(t, end, len(lines), "%s:%d: a fence that is never closed", page, i+1)
			if lang == "sh" || lang == "bash" || lang == "shell" {
				b := shellBlock{file: page, line: i + 1}
				for j := i - 1; j >= 0; j-- {
					if prev := strings.TrimSpace(lines[j]); prev != "" {
						if mm := docsMark.FindStringSubmatch(prev); mm != nil {
							b.mark = mm[1]
						}
						break
					}
				}
				var body []string
				for _, l := range lines[i+1 : end] {
					body = append(body, strings.TrimPrefix(l, indent))
				}
				b.text = strings.Join(body, "\n") + "\n"
				out = append(out, b)
			}
			i = end
		}
	}
	return out
}

// TestDocs_EveryShellBlockIsMarked: a command in the docs either runs in a test or says why it cannot.
func TestDocs_EveryShellBlockIsMarked(t *testing.T) {
	known := map[string]bool{markHere: true, markControlPlane: true, markControlPlane + "-1.34": true,
		markControlPlane + "-1.36": true, markControlPlane + "-uninstall": true, markControlPlane + "-hco": true,
		markCluster: true, markCI: true}
	blocks := shellBlocks(t, docPages(t)...)
	require.NotEmpty(t, blocks)
	counts := map[string]int{}
	for _, b := range blocks {
		counts[b.mark]++
		assert.True(t, known[b.mark], "%s: shell block marked %q; want the line before its fence to be <!-- docs-test: here|controlplane|controlplane-1.34|controlplane-1.36|controlplane-uninstall|controlplane-hco|cluster|ci -->", b, b.mark)
	}
	t.Logf("shell blocks by mark: %v", counts)
	assert.NotZero(t, counts[markHere], "no block runs here")
	assert.NotZero(t, counts[markControlPlane], "no block runs against the control plane")
}

// TestDocs_EveryPageSaysWhoItIsFor: each page opens (right after its title) with whom it is written for.
func TestDocs_EveryPageSaysWhoItIsFor(t *testing.T) {
	for _, page := range docPages(t) {
		if page == "README.md" {
			continue // the landing page: what it is, for whoever arrives
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		var first []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(l) != "" {
				first = append(first, l)
			}
			if len(first) == 2 {
				break
			}
		}
		require.Len(t, first, 2, page)
		assert.True(t, strings.HasPrefix(first[0], "# "), "%s: first line is not the title: %q", page, first[0])
		assert.True(t, strings.HasPrefix(first[1], "**Who this is for:**"), "%s: the paragraph after the title must open with **Who this is for:**, not %q", page, first[1])
	}
}

// TestDocs_RelativeLinksResolve: every relative link of the pages names a file of the repository, and an
// anchor names a heading of that page (GitHub's rule: lower case, punctuation dropped, spaces to hyphens).
func TestDocs_RelativeLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
			}
			_, err := os.Stat(filepath.Join(repoRoot, file))
			if !assert.NoError(t, err, "%s: link %s", page, target) {
				continue
			}
			if anchor != "" && strings.HasSuffix(file, ".md") {
				assert.Contains(t, headingAnchors(t, file), anchor, "%s: link %s: no such heading in %s", page, target, file)
			}
		}
	}
}

func headingAnchors(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, page))
	require.NoError(t, err)
	var out []string
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	inFence := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(l, "#"))
		out = append(out, strings.ReplaceAll(strings.ToLower(drop.ReplaceAllString(title, "")), " ", "-"))
	}
	return out
}

// TestDocs_MakeTargetsExist: every `make <target>` the docs name (in inline code, or as a command of a block
// that runs here or on the control plane: cluster blocks may run in another tree, KubeVirt's) is a target
// of the Makefile.
func TestDocs_MakeTargetsExist(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+):`).FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	inline := regexp.MustCompile("`make ([a-z][a-z0-9-]+)")
	command := regexp.MustCompile(`(?m)^\s*make ([a-z][a-z0-9-]+)`)
	named := 0
	check := func(where, target string) {
		named++
		assert.True(t, targets[target], "%s: `make %s`: no such target in the Makefile", where, target)
	}
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, m := range inline.FindAllStringSubmatch(string(data), -1) {
			check(page, m[1])
		}
	}
	for _, b := range shellBlocks(t, docPages(t)...) {
		if b.mark == markCluster {
			continue
		}
		for _, m := range command.FindAllStringSubmatch(b.text, -1) {
			check(b.String(), m[1])
		}
	}
	require.NotZero(t, named)
}

// TestDocs_ClusterBlocksParse: the blocks that need a live cluster cannot run here; bash parses them.
func TestDocs_ClusterBlocksParse(t *testing.T) {
	for _, b := range shellBlocks(t, docPages(t)...) {
		if b.mark != markCluster {
			continue
		}
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(b.text)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "%s: bash -n:\n%s\n%s", b, out, b.text)
	}
}

// TestDocs_CIBlocksAreWhatCIRuns: a block marked ci is run by CI itself: every command in it (comments
// dropped) is a line of .ci/run.
func TestDocs_CIBlocksAreWhatCIRuns(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	require.NoError(t, err)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(ci), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, b := range shellBlocks(t, docPages(t)...) {
		if b.mark != markCI {
			continue
		}
		for _, l := range strings.Split(b.text, "\n") {
			cmd, _, _ := strings.Cut(l, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				assert.True(t, lines[cmd], "%s: %q is not a command of .ci/run", b, cmd)
			}
		}
	}
}

// TestDocs_HereBlocksRun runs, in page order, every block marked `here`, each in a fresh copy of the
// repository (so that what one block builds or writes changes neither the repository nor the next block),
// with the kubectl of this module on PATH, and fails on a non-zero exit.
func TestDocs_HereBlocksRun(t *testing.T) {
	env := []string{"PATH=" + toolPath(t) + string(os.PathListSeparator) + os.Getenv("PATH")}
	var ran int
	for _, b := range shellBlocks(t, docPages(t)...) {
		if b.mark != markHere {
			continue
		}
		ran++
		t.Run(b.String(), func(t *testing.T) {
			out, err := runBlock(t, copyRepo(t), b, env)
			require.NoError(t, err, "%s:\n%s\noutput:\n%s", b, b.text, out)
		})
	}
	require.NotZero(t, ran)
}

// runBlock runs one block with bash -euo pipefail in dir (a copy of the repository) and returns its output.
func runBlock(t *testing.T, dir string, b shellBlock, env []string) (string, error) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("%s (%v):\n%s", b, time.Since(start).Round(time.Millisecond), tailLines(out.String(), 40))
	return out.String(), err
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// copyRepo copies the repository's files (not .git, not the build outputs under bin/) into a temp dir.
func copyRepo(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel == ".git" || rel == "bin" {
			if !d.IsDir() {
				return nil // a worktree's .git is a file: SkipDir would skip the rest of the root
			}
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, info.Mode().Perm())
		}
		return nil // sockets, FIFOs: not part of the repository
	})
	require.NoError(t, err)
	return dst
}

// kubectlEnv names a kubectl built from kubernetesModule (test/cluster/kubernetes, a `tool` in its go.mod);
// `make test-controlplane` and `make test-docs` build it once. Unset, the suite builds it itself.
const kubectlEnv = "SRIOV_UDN_KUBECTL"

// toolPath returns a directory holding `kubectl` for the docs' blocks.
func toolPath(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(kubectlEnv)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "kubectl")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", bin, "k8s.io/kubernetes/cmd/kubectl")
		cmd.Dir = kubernetesModule
		out, err := cmd.CombinedOutput()
		require.NoErrorf(t, err, "go build k8s.io/kubernetes/cmd/kubectl (set %s to skip):\n%s", kubectlEnv, out)
		t.Logf("built kubectl in %v (%s unset)", time.Since(start).Round(time.Second), kubectlEnv)
	}
	bin, err := filepath.Abs(bin)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(dir, "kubectl")))
	// The OpenShift page's commands: oc is kubectl's commands and flags, and more.
	require.NoError(t, os.Symlink(bin, filepath.Join(dir, "oc")))
	return dir
}

// docEnv is the environment the docs' blocks run with against c, made once per server.
func (c *cluster) docEnv(t *testing.T) []string {
	t.Helper()
	if c.shellEnv == nil {
		c.shellEnv = []string{
			"PATH=" + toolPath(t) + string(os.PathListSeparator) + os.Getenv("PATH"),
			"KUBECONFIG=" + c.writeKubeconfig(t),
		}
	}
	return c.shellEnv
}

// markedBlocks returns the blocks of page with exactly this mark, in order.
func markedBlocks(t *testing.T, page, mark string) []shellBlock {
	t.Helper()
	var out []shellBlock
	for _, b := range shellBlocks(t, page) {
		if b.mark == mark {
			out = append(out, b)
		}
	}
	require.NotEmpty(t, out, "%s: no block marked %s", page, mark)
	return out
}

// controlPlaneBlocks returns the blocks of page marked controlplane or controlplane-<minor>, in order.
func controlPlaneBlocks(t *testing.T, page, minor string) []shellBlock {
	t.Helper()
	var out []shellBlock
	for _, b := range shellBlocks(t, page) {
		if b.mark == markControlPlane || b.mark == markControlPlane+"-"+minor {
			out = append(out, b)
		}
	}
	return out
}

// writeKubeconfig writes a kubeconfig for c, as a user's kubectl would read it.
func (c *cluster) writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	fmt.Fprintf(w, "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: %s\n    certificate-authority: %s\n", c.config.Host, c.config.CAFile)
	fmt.Fprintf(w, "users:\n- name: test\n  user:\n    token: %s\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\n", c.config.BearerToken)
	require.NoError(t, w.Flush())
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	return path
}
