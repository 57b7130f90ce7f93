package main

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseFlags_DefaultsMatchKubeVirtLayout(t *testing.T) {
	cfg, err := parseFlags(nil, envFrom(nil), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, config{
		socketDir:      "/var/run/kubevirt-hooks",
		socketName:     "sriov-udn-binding.sock",
		bindingName:    "sriov-udn",
		deviceInfoFile: "/etc/podinfo/network-info",
		podInfoDir:     "/var/run/kubevirt-private/downwardapi/podinfo",
		ifaceCacheDir:  "/var/run/kubevirt-hooks/ifacecache",
		waitTimeout:    45 * time.Second,
		logLevel:       slog.LevelInfo,

		bindingNameSource: "default",
	}, cfg)
}

// KubeVirt v1.9 tells a binding-plugin sidecar its binding name (pkg/hooks/hooks.go
// NetworkBindingPluginNameEnvVar); v1.8 does not, so the built-in default still applies there.
func TestParseFlags_BindingName_FlagBeatsTwinBeatsKubeVirtEnvBeatsDefault(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		env          map[string]string
		want         string
		wantSource   string
		wantKubeVirt string
	}{
		{"v1.8 pod: nothing set", nil, nil, "sriov-udn", "default", ""},
		{"v1.9 pod: KubeVirt's name", nil, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": "sriov-udn-l2"}, "sriov-udn-l2", "NETWORK_BINDING_PLUGIN_NAME", "sriov-udn-l2"},
		{"empty KubeVirt env is unset", nil, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": " "}, "sriov-udn", "default", ""},
		{"twin beats KubeVirt's name", nil, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": "kv", "BINDING_NAME": "twin"}, "twin", "BINDING_NAME", "kv"},
		{"flag beats both", []string{"--binding-name", "flag"}, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": "kv", "BINDING_NAME": "twin"}, "flag", "--binding-name", "kv"},
		{"flag beats KubeVirt's name", []string{"--binding-name=flag"}, map[string]string{"NETWORK_BINDING_PLUGIN_NAME": "kv"}, "flag", "--binding-name", "kv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(tt.args, envFrom(tt.env), &bytes.Buffer{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.bindingName)
			assert.Equal(t, tt.wantSource, cfg.bindingNameSource)
			assert.Equal(t, tt.wantKubeVirt, cfg.kubevirtBindingName)
		})
	}
}

func TestParseFlags_FlagBeatsEnvBeatsDefault(t *testing.T) {
	env := envFrom(map[string]string{
		"SOCKET_DIR": "/env/dir", "SOCKET_NAME": "env.sock", "BINDING_NAME": "env-binding",
		"DEVICE_INFO_FILE": "/env/ni", "POD_INFO_DIR": "/env/pi", "IFACE_CACHE_DIR": "/env/cache",
		"WAIT_TIMEOUT": "10s", "LOG_LEVEL": "debug",
	})
	cfg, err := parseFlags([]string{"--socket-name", "flag.sock", "--wait-timeout=20s"}, env, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "/env/dir", cfg.socketDir)
	assert.Equal(t, "flag.sock", cfg.socketName)
	assert.Equal(t, "env-binding", cfg.bindingName)
	assert.Equal(t, "/env/ni", cfg.deviceInfoFile)
	assert.Equal(t, "/env/pi", cfg.podInfoDir)
	assert.Equal(t, "/env/cache", cfg.ifaceCacheDir)
	assert.Equal(t, 20*time.Second, cfg.waitTimeout)
	assert.Equal(t, slog.LevelDebug, cfg.logLevel)
}

// MY_POD_IP goes through the flag parser like every other setting (the manifests set it from
// status.podIP), so --pod-ip can override it and `--help` lists it.
func TestParseFlags_PodIPFromEnvOrFlag(t *testing.T) {
	cfg, err := parseFlags(nil, envFrom(map[string]string{"MY_POD_IP": "fd00::5"}), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "fd00::5", cfg.podIP)
	cfg, err = parseFlags([]string{"--pod-ip", "10.0.0.5"}, envFrom(map[string]string{"MY_POD_IP": "fd00::5"}), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.5", cfg.podIP)
	help := &bytes.Buffer{}
	_, err = parseFlags([]string{"--help"}, envFrom(nil), help)
	require.ErrorIs(t, err, errHelp)
	assert.Contains(t, help.String(), "env MY_POD_IP")
}

func TestParseFlags_ExplicitFlagWinsOverMalformedEnvTwin(t *testing.T) {
	cfg, err := parseFlags([]string{"--wait-timeout", "30s", "--log-level", "debug"},
		envFrom(map[string]string{"WAIT_TIMEOUT": "45", "LOG_LEVEL": "verbose"}), &bytes.Buffer{})
	require.NoError(t, err, "restartPolicy Never: a stray env value must not fail a sidecar whose flags are right")
	assert.Equal(t, 30*time.Second, cfg.waitTimeout)
	assert.Equal(t, slog.LevelDebug, cfg.logLevel)
}

func TestParseFlags_BadValuesGiveOneClearError(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--nope"}, nil, "flag provided but not defined: -nope"},
		{"bad duration", []string{"--wait-timeout", "soon"}, nil, "invalid value \"soon\" for flag -wait-timeout"},
		{"timeout above hook deadline", []string{"--wait-timeout", "2m"}, nil, "below virt-launcher's 1m hook deadline"},
		{"zero timeout", []string{"--wait-timeout", "0s"}, nil, "must be at least 1s"},
		{"1ns timeout", []string{"--wait-timeout=1ns"}, nil, "must be at least 1s"},
		{"empty cache dir", []string{"--iface-cache-dir", ""}, nil, "invalid --iface-cache-dir: must not be empty"},
		{"empty cache dir env", nil, map[string]string{"IFACE_CACHE_DIR": ""}, "invalid --iface-cache-dir: must not be empty"},
		{"bad env duration", nil, map[string]string{"WAIT_TIMEOUT": "x"}, "invalid WAIT_TIMEOUT \"x\""},
		{"bad env level names the env", nil, map[string]string{"LOG_LEVEL": "verbose"}, "invalid LOG_LEVEL \"verbose\""},
		{"bad level", []string{"--log-level", "loud"}, nil, "invalid --log-level \"loud\""},
		{"empty binding", []string{"--binding-name", " "}, nil, "invalid --binding-name: must not be empty"},
		{"stray argument", []string{"extra"}, nil, "unexpected argument \"extra\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, envFrom(tc.env), &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestRun_ExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{"version", []string{"--version"}, 0, "dev", ""},
		{"help", []string{"--help"}, 0, "-socket-dir", ""},
		{"bad flag", []string{"--wait-timeout", "x"}, 2, "", "sriov-udn-binding: invalid value"},
		{"missing socket dir", []string{"--socket-dir", "/nonexistent-sriov-udn"}, 1, "", `"level":"ERROR","msg":"stopped on error","error":"hooks: socket directory \"/nonexistent-sriov-udn\"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut)
			assert.Equal(t, tc.code, code, "stderr: %s", errOut.String())
			assert.Contains(t, out.String(), tc.inStdout)
			assert.Contains(t, errOut.String(), tc.inStderr)
		})
	}
}

// manifests/plugin/mutating-policy.yaml sets PLUGIN_SOCKET; unset, the Plugin API is off.
func TestParseFlags_PluginSocketFromEnvOrFlag(t *testing.T) {
	cfg, err := parseFlags(nil, envFrom(nil), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Empty(t, cfg.pluginSocket)
	cfg, err = parseFlags(nil, envFrom(map[string]string{"PLUGIN_SOCKET": "/var/run/kubevirt-plugin/p/env.sock"}), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "/var/run/kubevirt-plugin/p/env.sock", cfg.pluginSocket)
	cfg, err = parseFlags([]string{"--plugin-socket", "/var/run/kubevirt-plugin/p/flag.sock"}, envFrom(map[string]string{"PLUGIN_SOCKET": "/x/env.sock"}), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "/var/run/kubevirt-plugin/p/flag.sock", cfg.pluginSocket)
}

func TestPluginWait_ShorterOfWaitTimeoutAndThePluginBudget(t *testing.T) {
	assert.Equal(t, 25*time.Second, pluginWait(config{waitTimeout: 45 * time.Second}))
	assert.Equal(t, 5*time.Second, pluginWait(config{waitTimeout: 5 * time.Second}))
}
