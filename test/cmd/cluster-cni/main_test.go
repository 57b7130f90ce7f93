package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func noCluster(*Config) (Cluster, error) { return nil, errors.New("no apiserver in this test") }

func TestRun_Version(t *testing.T) {
	var out bytes.Buffer
	status := run(strings.NewReader(`{"cniVersion":"1.0.0"}`), &out, envMap(map[string]string{"CNI_COMMAND": "VERSION"}), noCluster)
	require.Equal(t, 0, status)
	assert.JSONEq(t, `{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}`, out.String())
}

// Bad stdin or environment never panics: it prints the spec's error JSON with the right code and exits 1.
func TestRun_BadInput_ErrorJSONAndNonZeroExit(t *testing.T) {
	addEnv := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/var/run/netns/x", "CNI_IFNAME": "eth0",
		"CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range addEnv {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	tests := []struct {
		name, stdin string
		env         map[string]string
		code        uint
		want        string
	}{
		{"empty stdin", "", addEnv, codeDecode, "stdin is empty"},
		{"binary stdin", "\x00\xff\xfe", addEnv, codeDecode, "decode stdin"},
		{"JSON null", "null", addEnv, codeIncompatibleVersion, "cniVersion"},
		{"JSON list", "[]", addEnv, codeDecode, "decode stdin"},
		{"unknown command", validConfig, with("CNI_COMMAND", "GC"), codeInvalidEnv, `CNI_COMMAND "GC"`},
		{"no command", validConfig, with("CNI_COMMAND", ""), codeInvalidEnv, `CNI_COMMAND ""`},
		{"no apiserver", validConfig, addEnv, codeInternal, "no apiserver in this test"},
		{"DEL bad container id", validConfig, map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "../x", "CNI_IFNAME": "eth0"}, codeInvalidEnv, `CNI_CONTAINERID "../x"`},
		{"DEL no ifname", validConfig, map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1"}, codeInvalidEnv, "CNI_IFNAME"},
		{"CHECK without prevResult", validConfig, with("CNI_COMMAND", "CHECK"), codeInvalidConfig, "CHECK needs prevResult"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			status := run(strings.NewReader(tt.stdin), &out, envMap(tt.env), noCluster)
			assert.Equal(t, 1, status)
			var ce cniError
			require.NoError(t, json.Unmarshal(out.Bytes(), &ce), "stdout %q", out.String())
			assert.Equal(t, cniVersion, ce.CNIVersion)
			assert.Equal(t, tt.code, ce.Code, ce.Msg)
			assert.Contains(t, ce.Msg, tt.want)
		})
	}
}

func TestRun_AddWithoutPodArgs_InvalidEnv(t *testing.T) {
	var out bytes.Buffer
	env := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/var/run/netns/x", "CNI_IFNAME": "eth0", "CNI_ARGS": "IgnoreUnknown=1"}
	status := run(strings.NewReader(validConfig), &out, envMap(env), func(*Config) (Cluster, error) { return newMemCluster(), nil })
	require.Equal(t, 1, status)
	var ce cniError
	require.NoError(t, json.Unmarshal(out.Bytes(), &ce))
	assert.Equal(t, uint(codeInvalidEnv), ce.Code)
	assert.Contains(t, ce.Msg, "K8S_POD_NAMESPACE")
}
