package controlplane_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testBrokenManifest applies a copy of manifests/ with one CEL expression broken: kubectl must fail with
// the server's own validation error (the server compiles a policy's expressions when it stores it), so
// this suite catches what only a real server catches.
func testBrokenManifest(t *testing.T, c *cluster, k *kubectl) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(manifestsDir)))
	file := filepath.Join(dir, "policy", "validating-policy.yaml")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	const good = "in ['None', 'External']"
	require.Contains(t, string(data), good)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(data), good, "in ['None', 'External'", 1)), 0o644))

	out, err := k.applyKustomize(c.entryPoint(t, dir))
	require.Error(t, err, "kubectl apply -k of a broken policy: %s", out)
	msg := err.Error()
	assert.Contains(t, msg, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "`+mainPolicy+`" is invalid`)
	assert.Contains(t, msg, "spec.validations[1].expression")
	assert.Contains(t, msg, "compilation failed")
	// kubectl's error starts with the whole patch it sent; the server's answer is at the end.
	t.Logf("the server's error: %s", msg[strings.LastIndex(msg, "error when patching"):])
}
