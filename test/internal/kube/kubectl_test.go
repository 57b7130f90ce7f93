package kube

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fake kubectl (a shell script) shows the command line, stdin, stdout and the error Run makes of stderr.
func TestKubectl_RunsWrappedWithKubeconfigAndStdin(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl")
	script := "#!/bin/sh\nif [ \"$3\" = fail ]; then echo boom >&2; exit 3; fi\nprintf '{\"args\":\"%s\",\"in\":\"%s\",\"x\":\"%s\"}' \"$*\" \"$(cat)\" \"$X\"\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	k := Kubectl{Binary: bin, Kubeconfig: "/kc", Wrap: []string{"env", "X=1"}}

	out, err := k.Run(context.Background(), []byte("doc"), "apply", "-f", "-")
	require.NoError(t, err)
	assert.JSONEq(t, `{"args":"--kubeconfig /kc apply -f -","in":"doc","x":"1"}`, string(out))

	var got struct{ Args string }
	require.NoError(t, k.GetJSON(context.Background(), &got, "pods"))
	assert.Equal(t, "--kubeconfig /kc get pods -o json", got.Args)

	_, err = k.Run(context.Background(), nil, "fail")
	assert.ErrorContains(t, err, "kubectl fail: exit status 3: boom")
}
