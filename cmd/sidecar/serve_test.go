package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveOnce runs serve with a context that is already cancelled: it starts (and logs its start-up lines),
// then stops at once.
func serveOnce(t *testing.T, args []string, env map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := parseFlags(append([]string{"--socket-dir", dir, "--iface-cache-dir", filepath.Join(dir, "cache"),
		"--device-info-file", filepath.Join(dir, "network-info"), "--pod-info-dir", filepath.Join(dir, "podinfo")}, args...),
		envFrom(env), &bytes.Buffer{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	cancel()
	var logs bytes.Buffer
	require.NoError(t, serve(ctx, cfg, &logs))
	return logs.String()
}

func TestServe_BindingNameOtherThanKubeVirtsOwn_LogsOneWarning(t *testing.T) {
	logs := serveOnce(t, []string{"--binding-name", "mine"}, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": "kv-name"})
	assert.Contains(t, logs, `"binding":"mine","bindingSource":"--binding-name"`)
	assert.Contains(t, logs, `"level":"WARN","msg":"binding name differs from the one KubeVirt set","binding":"mine"`)
	assert.Contains(t, logs, `"kubevirtBinding":"kv-name"`)

	logs = serveOnce(t, nil, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": "kv-name"})
	assert.Contains(t, logs, `"binding":"kv-name","bindingSource":"NETWORK_BINDING_PLUGIN_NAME"`)
	assert.NotContains(t, logs, "WARN", "KubeVirt's own name in use: nothing to say")

	logs = serveOnce(t, nil, nil)
	assert.Contains(t, logs, `"binding":"sriov-udn","bindingSource":"default"`)
	assert.NotContains(t, logs, "WARN", "v1.8: KubeVirt names nothing")
}
