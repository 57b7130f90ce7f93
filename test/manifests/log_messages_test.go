package manifests_test

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	operationsDoc = filepath.Join("..", "..", "docs", "operations.md")
	// The sidecar's sources: every log line it can write is a log/slog call in them.
	sidecarSources = []string{filepath.Join("..", "..", "pkg"), filepath.Join("..", "..", "cmd")}
)

// slogMethods are *slog.Logger's (and package slog's) logging calls, with the index of the message argument.
var slogMethods = map[string]int{
	"Debug": 0, "Info": 0, "Warn": 0, "Error": 0,
	"DebugContext": 1, "InfoContext": 1, "WarnContext": 1, "ErrorContext": 1,
	"Log": 2, "LogAttrs": 2,
}

// loggerExpr matches the receivers the sidecar logs through: package slog, or a value named log or logger
// (a field or a variable).
var loggerExpr = regexp.MustCompile(`^(slog|(\w+\.)*(log|logger))$`)

// sidecarLogMessages parses every non-test Go file of the sidecar and returns each slog message with where
// it is written. A message that is not a string literal fails: the list could not be checked.
func sidecarLogMessages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, root := range sidecarSources {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				idx, ok := slogMethods[sel.Sel.Name]
				if !ok {
					return true
				}
				var recv strings.Builder
				if err := printer.Fprint(&recv, fset, sel.X); err != nil || !loggerExpr.MatchString(recv.String()) {
					return true
				}
				pos := fset.Position(call.Pos())
				where := filepath.ToSlash(strings.TrimPrefix(pos.Filename, filepath.Join("..", "..")+string(filepath.Separator))) + ":" + strconv.Itoa(pos.Line)
				require.Greater(t, len(call.Args), idx, "%s: %s.%s without a message", where, recv.String(), sel.Sel.Name)
				lit, ok := call.Args[idx].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, "%s: the log message is not a string literal, so docs/operations.md cannot be checked against it", where)
				msg, err := strconv.Unquote(lit.Value)
				require.NoError(t, err, where)
				out[msg] = append(out[msg], where)
				return true
			})
			return nil
		})
		require.NoError(t, err, "walk %s", root)
	}
	require.NotEmpty(t, out)
	return out
}

// documentedLogMessages returns the messages docs/operations.md lists: the first cell, in backquotes, of each
// row of the table under "### Every message".
func documentedLogMessages(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	_, section, found := strings.Cut(string(data), "\n### Every message\n")
	require.True(t, found, "%s has no heading \"### Every message\"", operationsDoc)
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var out []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out)
	return out
}

// docs/operations.md lists every message the sidecar can log, and no other.
func TestLogMessages_OperationsListsEveryMessageTheSidecarWrites(t *testing.T) {
	inCode := sidecarLogMessages(t)
	documented := documentedLogMessages(t)
	sorted := slices.Sorted(slices.Values(documented))
	require.Equal(t, slices.Compact(slices.Clone(sorted)), sorted, "%s lists a message twice", operationsDoc)
	var code []string
	for msg := range inCode {
		code = append(code, msg)
	}
	slices.Sort(code)
	for _, msg := range code {
		require.Contains(t, sorted, msg, "%s does not list the message %q, logged at %v", operationsDoc, msg, inCode[msg])
	}
	require.Equal(t, code, sorted, "%s lists messages the sidecar no longer writes (left: in the code, right: listed)", operationsDoc)
}
