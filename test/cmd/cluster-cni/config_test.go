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

const validConfig = `{"cniVersion":"1.0.0","name":"pods","type":"cluster-cni","kubeconfig":"/etc/kubernetes/cni.kubeconfig",
"pluginDir":"/usr/lib/cni","dataDir":"/var/lib/cluster-cni",
"podNetwork":{"bridge":"cni0","subnetV4":"10.244.0.1/24","subnetV6":"fd00:10:244::/64","serviceSubnets":["10.96.0.1/16"]}}`

func TestParseConfig_Valid_Canonicalised(t *testing.T) {
	c, err := parseConfig([]byte(validConfig))
	require.NoError(t, err)
	assert.Equal(t, "pods", c.Name)
	assert.Equal(t, "/usr/lib/cni", c.PluginDir)
	assert.Equal(t, PodNetworkConfig{Bridge: "cni0", SubnetV4: "10.244.0.0/24", SubnetV6: "fd00:10:244::/64", ServiceSubnets: []string{"10.96.0.0/16"}}, c.PodNetwork)
}

func TestParseConfig_Invalid_ErrorNamesFieldAndCode(t *testing.T) {
	edit := func(from, to string) string { return strings.Replace(validConfig, from, to, 1) }
	tests := []struct {
		name, input string
		code        uint
		want        string
	}{
		{"empty", "", codeDecode, "stdin is empty"},
		{"not JSON", "{", codeDecode, "decode stdin"},
		{"wrong type", `{"cniVersion":1}`, codeDecode, "decode stdin"},
		{"old version", edit(`"1.0.0"`, `"0.4.0"`), codeIncompatibleVersion, `cniVersion "0.4.0" is not supported`},
		{"no name", edit(`"name":"pods"`, `"name":""`), codeInvalidConfig, "name is empty"},
		{"no kubeconfig", edit(`"/etc/kubernetes/cni.kubeconfig"`, `""`), codeInvalidConfig, "kubeconfig is empty"},
		{"relative pluginDir", edit(`"/usr/lib/cni"`, `"lib/cni"`), codeInvalidConfig, `pluginDir "lib/cni" is not an absolute path`},
		{"no dataDir", edit(`"dataDir":"/var/lib/cluster-cni",`, ``), codeInvalidConfig, `dataDir "" is not an absolute path`},
		{"long bridge", edit(`"cni0"`, `"a-sixteen-bytes!"`), codeInvalidConfig, "podNetwork.bridge"},
		{"v6 as v4", edit(`"10.244.0.1/24"`, `"fd00::/64"`), codeInvalidConfig, "podNetwork.subnetV4: fd00::/64 is not an IPv4 subnet"},
		{"v4 as v6", edit(`"fd00:10:244::/64"`, `"10.0.0.0/8"`), codeInvalidConfig, "podNetwork.subnetV6"},
		{"tiny subnet", edit(`"10.244.0.1/24"`, `"10.244.0.1/31"`), codeInvalidConfig, "too small"},
		{"bad service subnet", edit(`"10.96.0.1/16"`, `"10.96.0.1"`), codeInvalidConfig, "podNetwork.serviceSubnets[0]"},
		{"too large", strings.Repeat(" ", maxConfigSize+1), codeInvalidConfig, "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.input))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "network config")
			assert.Equal(t, tt.code, errorCode(err))
		})
	}
}

// FuzzParseConfig: any stdin yields a config or an error, never a panic; an accepted config is already
// canonical (parsing its own encoding gives it back) and has what ADD relies on.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(`{"cniVersion":"1.0.0"}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"x","type":"y","kubeconfig":"k","pluginDir":"/a","dataDir":"/b","podNetwork":{"bridge":"b","subnetV4":"1.2.3.4/30","subnetV6":"::/126"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig(data)
		if err != nil {
			var ce *configError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a configError", err)
			}
			return
		}
		if c.Name == "" || c.PodNetwork.SubnetV4 == "" || c.PodNetwork.SubnetV6 == "" || checkIfName(c.PodNetwork.Bridge) != nil {
			t.Fatalf("accepted %+v", c)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := parseConfig(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		b2, _ := json.Marshal(c2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("not canonical:\n%s\n%s", b, b2)
		}
	})
}
