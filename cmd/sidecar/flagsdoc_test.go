package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docFlag is one row of a flags table in the docs, or one flag of a --help text.
type docFlag struct {
	env, def string // "-" for a flag without an environment twin; `""` for an empty default
}

// helpFlags reads the flags of a flag.PrintDefaults text: "  -name type" lines, each followed by its usage,
// which names the environment twin as "(env NAME)" and ends with `(default "v")` or `(default v)` when the
// default is not the zero value.
func helpFlags(t *testing.T, help string) map[string]docFlag {
	t.Helper()
	head := regexp.MustCompile(`^  -([a-z][a-z0-9-]*)(?: (\S+))?$`)
	env := regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)\)`)
	def := regexp.MustCompile(`\(default (?:"([^"]*)"|([^)]*))\)\s*$`)
	out := map[string]docFlag{}
	var name, kind string
	var usage []string
	flush := func() {
		if name == "" {
			return
		}
		text := strings.Join(usage, " ")
		f := docFlag{env: "-", def: `""`}
		if kind == "" { // a bool flag: PrintDefaults names no type and shows no false default
			f.def = "false"
		}
		if m := env.FindAllStringSubmatch(text, -1); m != nil {
			f.env = m[len(m)-1][1] // the twin is named last; a usage may mention other variables first
		}
		if m := def.FindStringSubmatch(text); m != nil {
			f.def = m[1] + m[2]
		}
		out[name] = f
	}
	for _, line := range strings.Split(help, "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			flush()
			name, kind, usage = m[1], m[2], nil
			continue
		}
		if name != "" && strings.HasPrefix(line, "    ") {
			usage = append(usage, strings.TrimSpace(line))
		}
	}
	flush()
	require.NotEmpty(t, out, "no flags in:\n%s", help)
	return out
}

// tableFlags reads the flags table that follows heading in the doc page: rows "| `--name` | env | default |
// ..." (with columns named flag, env and default; a table without an env column has no twins).
func tableFlags(t *testing.T, page, heading string) map[string]docFlag {
	t.Helper()
	data, err := os.ReadFile(page)
	require.NoError(t, err)
	text := string(data)
	at := strings.Index(text, "\n"+heading+"\n")
	require.GreaterOrEqual(t, at, 0, "%s: no heading %q", page, heading)
	var cols []string
	out := map[string]docFlag{}
	for _, line := range strings.Split(text[at+len(heading)+2:], "\n") {
		if strings.HasPrefix(line, "#") {
			break // the next section
		}
		if !strings.HasPrefix(line, "|") {
			if len(cols) > 0 && len(out) > 0 {
				break // the table ended
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case cols == nil:
			cols = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			row := map[string]string{}
			for i, c := range cols {
				if i < len(cells) {
					row[c] = strings.Trim(cells[i], "`")
				}
			}
			name, ok := strings.CutPrefix(row["flag"], "--")
			require.True(t, ok, "%s: %q is not a --flag", page, row["flag"])
			f := docFlag{env: "-", def: row["default"]}
			if e, ok := row["env"]; ok {
				f.env = e
			}
			out[name] = f
		}
	}
	require.NotEmpty(t, out, "%s: no flags table after %q", page, heading)
	return out
}

// The docs' flags table is what users read; --help is what the binary does. They must be one list: same
// flags, same environment twins, same defaults.
func TestFlagsTable_EqualsHelp(t *testing.T) {
	var help bytes.Buffer
	_, err := parseFlags([]string{"--help"}, func(string) (string, bool) { return "", false }, &help)
	require.True(t, errors.Is(err, errHelp), "parseFlags --help: %v", err)
	got := helpFlags(t, help.String())
	want := tableFlags(t, filepath.Join("..", "..", "docs", "configuration.md"), "## Sidecar flags")
	assert.Equal(t, got, want, "docs/configuration.md \"Sidecar flags\" against sriov-udn-binding --help:\n%s", help.String())
}

func TestRenderFlagsTable_EqualsRenderHelp(t *testing.T) {
	t.Setenv("MY_POD_IP", "")
	require.NoError(t, os.Unsetenv("MY_POD_IP")) // render's --pod-ip default comes from it
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runRender([]string{"--help"}, &stdout, &stderr), "render --help: %s", stderr.String())
	got := helpFlags(t, stdout.String())
	want := tableFlags(t, filepath.Join("..", "..", "docs", "troubleshooting.md"), "## `render`: what the hooks would do with this pod and VMI")
	assert.Equal(t, got, want, "docs/troubleshooting.md render flags against render --help:\n%s", stdout.String())
}

// The readers above would pass on two empty lists: they must find what a --help text and a table hold.
func TestFlagsDocReaders_ReadEnvDefaultsAndBools(t *testing.T) {
	help := "Flags:\n  -a-dir string\n    \tdirectory (env A_DIR) (default \"/x\")\n  -b string\n    \tmentions env OTHER, then (env B) \n" +
		"  -c duration\n    \twait (env C); keep short (default 45s)\n  -version\n    \tprint the version\n"
	assert.Equal(t, map[string]docFlag{
		"a-dir":   {env: "A_DIR", def: "/x"},
		"b":       {env: "B", def: `""`},
		"c":       {env: "C", def: "45s"},
		"version": {env: "-", def: "false"},
	}, helpFlags(t, help))

	page := filepath.Join(t.TempDir(), "p.md")
	require.NoError(t, os.WriteFile(page, []byte("# t\n\n## Flags\n\ntext\n\n| flag | env | default | what |\n|---|---|---|---|\n"+
		"| `--a-dir` | `A_DIR` | `/x` | d |\n| `--version` | - | `false` | v |\n\nafter\n| `--not-a-row` | x | y | z |\n"), 0o644))
	assert.Equal(t, map[string]docFlag{"a-dir": {env: "A_DIR", def: "/x"}, "version": {env: "-", def: "false"}},
		tableFlags(t, page, "## Flags"))
}
