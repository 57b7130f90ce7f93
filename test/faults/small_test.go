package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Case 11: once logging began, even the fatal line is JSON.
func TestSmall_FatalStartupErrorAfterLoggingBegan_IsJSON(t *testing.T) {
	l := newLayout(t)
	plainPodInfo(t, l.PodInfoDir, 0o644)
	require.NoError(t, os.RemoveAll(l.HooksDir))
	code, out := runToExit(t, 10*time.Second, nil, args(l)...)
	assert.Equal(t, 1, code, out)
	var fatal map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON log line: %s", line)
		if m["level"] == "ERROR" {
			fatal = m
		}
	}
	require.NotNil(t, fatal, "no ERROR line:\n%s", out)
	assert.Contains(t, fmt.Sprint(fatal), l.HooksDir)
}

// Case 11: a malformed annotation line is reported by key and position, never by its value.
func TestSmall_MalformedAnnotationLines_ValueNeverLogged(t *testing.T) {
	const secret = "s3cr3t-t0ken-value-that-must-never-be-logged"
	for name, content := range map[string]string{
		"no equals sign":    "a=\"x\"\n" + secret + "-and-more",
		"unquoted value":    "k8s.ovn.org/pod-networks=" + secret,
		"bad quoted string": "k8s.ovn.org/pod-networks=\"" + secret + "\\q\"",
	} {
		t.Run(name, func(t *testing.T) {
			s := loadSamples(t)
			l := newLayout(t)
			require.NoError(t, os.MkdirAll(l.PodInfoDir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(l.PodInfoDir, "annotations"), []byte(content), 0o644))
			proc := start(t, l, "--wait-timeout", "1s")
			assert.Error(t, preCloudInitIso(t, l.Socket(), s.vmiJSON, noCloudJSON(t), 10*time.Second))
			_, err := proc.WaitLog(msgIs("hook call"), logWait)
			require.NoError(t, err)
			logs := proc.Logs()
			assert.Contains(t, logs, "input problem")
			assert.NotContains(t, logs, secret[:8])
		})
	}
}

// manyBoundInterfaces is a VMI with n interfaces bound to us and no data for any of them.
func manyBoundInterfaces(t *testing.T, n int) []byte {
	t.Helper()
	ifaces := make([]map[string]any, 0, n)
	nets := make([]map[string]any, 0, n)
	for i := range n {
		name := fmt.Sprintf("vf%d", i)
		ifaces = append(ifaces, map[string]any{"name": name, "binding": map[string]any{"name": "sriov-udn"}})
		nets = append(nets, map[string]any{"name": name, "multus": map[string]any{"networkName": fmt.Sprintf("ns/net-%d", i)}})
	}
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": "vm", "namespace": "ns", "uid": "5d0c6a1e-2b9f-4c61-9d0e-7f3b8c1a2e44"},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{"interfaces": ifaces}}, "networks": nets},
	})
	require.NoError(t, err)
	return raw
}

// Case 11: a line about 400 missing items is bounded (a count and the first few names).
func TestSmall_FourHundredMissingItems_EveryLogLineBounded(t *testing.T) {
	l := newLayout(t)
	proc := start(t, l, "--wait-timeout", "1s")
	assert.Error(t, preCloudInitIso(t, l.Socket(), manyBoundInterfaces(t, 400), noCloudJSON(t), 10*time.Second))
	_, err := proc.WaitLog(msgIs("hook call"), logWait)
	require.NoError(t, err)
	logs := proc.Logs()
	assert.Contains(t, logs, "waiting for data")
	for _, line := range strings.Split(logs, "\n") {
		assert.LessOrEqual(t, len(line), 2048, "log line: %.200s...", line)
	}
}

// Case 11: flags that would write into the working directory or never wait are refused.
func TestSmall_BadFlags_RefusedWithUsageExit(t *testing.T) {
	l := newLayout(t)
	cases := map[string]struct {
		args []string
		env  []string
		want string
	}{
		"empty cache dir flag": {args: args(l, "--iface-cache-dir", ""), want: "--iface-cache-dir"},
		"empty cache dir env":  {args: []string{"--socket-dir", l.HooksDir}, env: []string{"IFACE_CACHE_DIR="}, want: "--iface-cache-dir"},
		"1ns wait timeout":     {args: args(l, "--wait-timeout=1ns"), want: "--wait-timeout"},
		"500ms wait timeout":   {args: args(l, "--wait-timeout=500ms"), want: "--wait-timeout"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := runToExit(t, 10*time.Second, func(c *exec.Cmd) { c.Env = append(c.Env, tc.env...) }, tc.args...)
			assert.Equal(t, 2, code, out)
			assert.Contains(t, out, tc.want)
		})
	}
}

// Case 11: SIGHUP stops the sidecar like SIGTERM.
func TestSmall_SIGHUP_StopsCleanlyAndRemovesSocket(t *testing.T) {
	l := newLayout(t)
	proc := start(t, l)
	require.NoError(t, proc.Signal(syscall.SIGHUP))
	code, err := proc.Wait(stopBound)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, l.Socket())
}
