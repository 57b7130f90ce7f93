package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

var update = flag.Bool("update", false, "rewrite the render JSON goldens")

// renderFixtures are the pod/VMI pairs under testdata/render, plus the built-in sample; the parity
// test and the goldens run on all of them.
func renderFixtures(t *testing.T) map[string][2]string {
	t.Helper()
	out := map[string][2]string{"sample": {filepath.Join("samples", "pod.json"), filepath.Join("samples", "vmi.json")}}
	dirs, err := filepath.Glob(filepath.Join("testdata", "render", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, d := range dirs {
		out[filepath.Base(d)] = [2]string{filepath.Join(d, "pod.json"), filepath.Join(d, "vmi.json")}
	}
	return out
}

func runCapture(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runRender(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRender_Sample_ShowsEveryOutputForBothInterfaces(t *testing.T) {
	code, text, stderr := runCapture("--sample")
	require.Equal(t, exitRendered, code, stderr)
	for _, want := range []string{
		`VMI tenant-a/vm-sriov: 2 interface(s) bound to "sriov-udn"`,
		"02:00:00:aa:01:01 (from vmi)",
		"02:00:00:aa:02:01 (from network-status)",
		"DHCP (pod-networks ipam_mode)",
		`<alias name="ua-sriov-sriov-l2">`,
		`bus="0x65" slot="0x00" function="0x2"`,
		"== NoCloud network-config (PreCloudInitIso, volume cloudinitdisk",
		"192.168.50.7/24",
		"fd50:0:0:1::7/64",
		`"podIPs":["192.168.50.7","fd50:0:0:1::7"]`,
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "ConfigDrive", "only the VMI's own datasource (NoCloud) is rendered")
	assert.NotContains(t, text, " - ", "no empty placeholders")
	assert.NotContains(t, text, "== warnings")
}

func TestRender_ConfigDriveOnlyVMI_RendersNetworkDataJSONOnly(t *testing.T) {
	d := filepath.Join("testdata", "render", "configdrive-only")
	code, text, stderr := runCapture("--pod", filepath.Join(d, "pod.json"), "--vmi", filepath.Join(d, "vmi.json"))
	require.Equal(t, exitRendered, code, stderr)
	assert.Contains(t, text, "== ConfigDrive network_data.json (PreCloudInitIso, volume cloudinitdisk")
	assert.NotContains(t, text, "NoCloud")
}

func TestRender_ExitCodes(t *testing.T) {
	fx := renderFixtures(t)
	tests := []struct {
		fixture    string
		code       int
		result     string
		wantStderr string
		wantText   string
	}{
		{"sample", exitRendered, "rendered", "", ""},
		// Masquerade without macAddress: DHCP matched by the pod interface's MAC (network-status).
		{"pod-nic-without-mac", exitRendered, "rendered", "", `"mac_address": "0a:58:0a:f4:01:0c"`},
		// Another plugin leaves the MAC to libvirt: that cannot be served.
		{"pod-nic-passt-without-mac", exitHookFail, "wouldFail", `the PreCloudInitIso hook would fail: PreCloudInitIso: interface "default" (pod network) has no macAddress`, "== the PreCloudInitIso hook would fail (exit code 1)"},
		{"malformed-pod-networks", exitHookFail, "wouldFail", `PreCloudInitIso: malformed downward API input`, "invalid CIDR"},
		{"missing-annotations", exitWaiting, "waiting", "", "== still missing: the hooks would wait for these"},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				code, stdout, stderr := runCapture("--pod", fx[tc.fixture][0], "--vmi", fx[tc.fixture][1], "--format", format)
				assert.Equal(t, tc.code, code, stderr)
				assert.Contains(t, stderr, tc.wantStderr)
				if format == "text" {
					assert.Contains(t, stdout, tc.wantText)
					continue
				}
				var r pipeline.Report
				require.NoError(t, json.Unmarshal([]byte(stdout), &r))
				assert.Equal(t, tc.result, r.Result)
				assert.Equal(t, tc.code, r.ExitCode)
			}
		})
	}
}

func TestRender_MissingData_ListsEachItemPerHook(t *testing.T) {
	fx := renderFixtures(t)["missing-annotations"]
	code, stdout, _ := runCapture("--pod", fx[0], "--vmi", fx[1], "--format", "json")
	require.Equal(t, exitWaiting, code)
	var r pipeline.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	hooks := map[string]int{}
	for _, m := range r.Missing {
		hooks[m.Hook]++
		assert.NotEmpty(t, m.Source)
		assert.Contains(t, m.Text, m.Interface)
	}
	assert.Equal(t, map[string]int{"PreCloudInitIso": 3, "OnDefineDomain": 2}, hooks)
	assert.Empty(t, r.DomainXML, "nothing half-rendered")
	assert.Nil(t, r.CloudInit)
}

func TestRender_Warnings(t *testing.T) {
	fx := renderFixtures(t)
	tests := []struct {
		fixture, code, iface, text string
	}{
		{"mac-mismatch", "mac-mismatch", "sriov-localnet", "macAddress 02:00:00:aa:02:99 differs from the mac in k8s.v1.cni.cncf.io/network-status"},
		{"nocloud-user-v2-same-mac", "user-network-data-wins", "sriov-l2", "noCloud networkData already configures this NIC"},
		{"configdrive-user-same-mac", "user-network-data-wins", "sriov-localnet", "configDrive networkData already configures this NIC"},
		{"no-cloudinit-volume", "no-cloud-init-volume", "", "virt-launcher v1.8 panics"},
		{"nothing-bound-core-sriov", "nothing-bound", "", `sriov-l2 uses KubeVirt's core "sriov" binding`},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			code, stdout, stderr := runCapture("--pod", fx[tc.fixture][0], "--vmi", fx[tc.fixture][1], "--format", "json")
			require.Equal(t, exitRendered, code, stderr)
			var r pipeline.Report
			require.NoError(t, json.Unmarshal([]byte(stdout), &r))
			require.Len(t, r.Warnings, 1)
			assert.Equal(t, tc.code, r.Warnings[0].Code)
			assert.Equal(t, tc.iface, r.Warnings[0].Interface)
			assert.Contains(t, r.Warnings[0].Message, tc.text)

			_, text, _ := runCapture("--pod", fx[tc.fixture][0], "--vmi", fx[tc.fixture][1])
			assert.Contains(t, text, "== warnings\n   ["+tc.code+"]")
		})
	}
}

func TestRender_WrongBindingName_WarnsNothingBound(t *testing.T) {
	code, text, _ := runCapture("--sample", "--binding-name", "sriov")
	assert.Equal(t, exitRendered, code)
	assert.Contains(t, text, `[nothing-bound] no interface of the VMI is bound to binding "sriov"`)
	assert.Contains(t, text, `sriov-l2 uses binding plugin "sriov-udn"`)
}

func TestRender_UserV2SameMAC_InterfaceListedButNotInNetworkConfig(t *testing.T) {
	fx := renderFixtures(t)["nocloud-user-v2-same-mac"]
	_, stdout, _ := runCapture("--pod", fx[0], "--vmi", fx[1], "--format", "json")
	var r pipeline.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	require.NotNil(t, r.CloudInit)
	assert.Contains(t, r.CloudInit.NetworkData, "192.0.2.10/24", "the user's entry is kept")
	assert.NotContains(t, r.CloudInit.NetworkData, "192.168.50.7", "ours for the same MAC is left out")
}

func TestRender_BadUsage_ExitTwoNamingTheFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	pod := write("pod.json", `{"kind":"Pod","metadata":{}}`)
	vmi := filepath.Join("samples", "vmi.json")
	empty := write("empty", "  \n")
	truncated := write("bad.json", `{"kind":"VirtualMachineInstance","spec":`)
	list := write("list.json", `{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod"},{"kind":"Pod"}]}`)
	array := write("array.json", `[1,2]`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no vmi", []string{"--pod", pod}, "--vmi FILE is required"},
		{"no pod", []string{"--vmi", vmi}, "--pod FILE is required"},
		{"both pod sources", []string{"--vmi", vmi, "--pod", pod, "--pod-info-dir", dir}, "either --pod or --pod-info-dir"},
		{"sample and files", []string{"--sample", "--vmi", vmi}, "--sample uses the built-in pod and VMI"},
		{"extra argument", []string{"--sample", "extra"}, `unexpected argument "extra"`},
		{"unknown flag", []string{"--vmj", vmi}, "flag provided but not defined: -vmj"},
		{"bad format", []string{"--sample", "--format", "xml"}, `invalid --format "xml"`},
		{"bad pod ip", []string{"--sample", "--pod-ip", "bogus"}, `invalid --pod-ip "bogus": want an IP address`},
		{"missing file", []string{"--vmi", filepath.Join(dir, "absent"), "--pod", pod}, "--vmi " + filepath.Join(dir, "absent") + ": no such file or directory"},
		{"directory", []string{"--vmi", vmi, "--pod", dir}, "--pod " + dir + ": is a directory: want a file holding a Pod object"},
		{"empty pod", []string{"--vmi", vmi, "--pod", empty}, "--pod " + empty + ": the file is empty: want a Pod object"},
		{"empty vmi", []string{"--vmi", empty, "--pod", pod}, "--vmi " + empty + ": the file is empty: want a VirtualMachineInstance object"},
		{"{} vmi", []string{"--vmi", write("obj.json", "{}"), "--pod", pod}, "no spec object: want a VirtualMachineInstance object (kubectl get vmi NAME -o json)"},
		{"null vmi", []string{"--vmi", write("null.json", "null"), "--pod", pod}, "empty: want a VirtualMachineInstance object"},
		{"{} pod", []string{"--vmi", vmi, "--pod", write("obj2.json", "{}")}, "no metadata object: want a Pod object"},
		{"truncated vmi", []string{"--vmi", truncated, "--pod", pod}, "--vmi " + truncated + ": not JSON or YAML"},
		{"wrong kind", []string{"--vmi", pod, "--pod", pod}, `kind is "Pod", want VirtualMachineInstance`},
		{"a VirtualMachine", []string{"--vmi", write("vm.json", `{"kind":"VirtualMachine","spec":{}}`), "--pod", pod}, "a VirtualMachine: want its VirtualMachineInstance"},
		{"list", []string{"--vmi", vmi, "--pod", list}, "a List of 2 items: want one Pod object; take one with kubectl get pod NAME -o json, or jq '.items[0]'"},
		{"array", []string{"--vmi", array, "--pod", pod}, "a list, not an object: want a VirtualMachineInstance object"},
		{"wrong field type", []string{"--vmi", write("t.json", `{"spec":{"domain":{"devices":{"interfaces":"x"}}}}`), "--pod", pod}, "field spec.domain.devices.interfaces: a JSON string is not valid there"},
		{"pod-info-dir missing", []string{"--vmi", vmi, "--pod-info-dir", filepath.Join(dir, "nope")}, "--pod-info-dir " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"pod-info-dir a file", []string{"--vmi", vmi, "--pod-info-dir", pod}, "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCapture(tc.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, tc.want)
			assert.Empty(t, stdout)
			assert.NotContains(t, stderr, "[]interface", "no Go type dumps")
			assert.NotContains(t, stderr, "Go struct")
		})
	}
}

func TestRender_PodIPFromEnv_NamedAsEnv(t *testing.T) {
	t.Setenv("MY_POD_IP", "bogus")
	code, _, stderr := runCapture("--sample")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `invalid env MY_POD_IP "bogus"`)
	code, _, stderr = runCapture("--sample", "--pod-ip", "10.0.0.1")
	assert.Equal(t, exitRendered, code, "the flag wins over the environment: %s", stderr)
}

func TestRender_Help_GoesToStdoutWithExitCodes(t *testing.T) {
	code, stdout, stderr := runCapture("--help")
	assert.Equal(t, 0, code)
	assert.Empty(t, stderr)
	for _, want := range []string{"Exit codes:", "  0  rendered", "  1  a hook would fail", "  2  bad usage", "  3  data is missing", "-pod-info-dir", "jq '.items[0]'"} {
		assert.Contains(t, stdout, want)
	}
}

func TestRun_TopLevelRenderFlag_HintsRender(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"--pod", "x.json"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--pod is a flag of the render subcommand: sriov-udn-binding render --pod x.json")
}

func TestRender_TextOutput_Cosmetics(t *testing.T) {
	dir := t.TempDir()
	vmi := `{"metadata":{"name":"solo"},"spec":{"domain":{"devices":{"interfaces":[{"name":"n1","macAddress":"02:00:00:00:00:01","binding":{"name":"sriov-udn"}}]}},` +
		`"networks":[{"name":"n1","multus":{"networkName":"ns/nad"}}],"volumes":[{"name":"c","cloudInitNoCloud":{}}]}}`
	pod := `{"metadata":{"annotations":{"k8s.ovn.org/pod-networks":"{\"ns/nad\":{\"ip_addresses\":null,\"mac_address\":\"02:00:00:00:00:01\",\"role\":\"secondary\"}}",` +
		`"kubevirt.io/network-info":"{\"interfaces\":[{\"network\":\"n1\",\"deviceInfo\":{\"type\":\"pci\",\"version\":\"1.1.0\",\"pci\":{\"pci-address\":\"0000:65:00.2\"}}}]}"}}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vmi.json"), []byte(vmi), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.json"), []byte(pod), 0o600))
	code, text, stderr := runCapture("--pod", filepath.Join(dir, "pod.json"), "--vmi", filepath.Join(dir, "vmi.json"))
	require.Equal(t, exitRendered, code, stderr)
	assert.Contains(t, text, "VMI solo: 1 interface(s)", "no leading slash without a namespace")
	assert.Contains(t, text, "mode       manual (no addresses")
	assert.NotContains(t, text, "mode       static")
	assert.Contains(t, text, `"type": "manual"`)
	assert.NotContains(t, text, "addresses  ", "no empty lines")
	assert.NotContains(t, text, "prefix guessed", "nothing was guessed")

	fx := renderFixtures(t)["missing-annotations"]
	code, text, _ = runCapture("--pod", fx[0], "--vmi", fx[1])
	assert.Equal(t, exitWaiting, code)
	assert.Contains(t, text, "MAC        not known yet")
	assert.NotContains(t, text, "(from )")
	assert.Contains(t, text, "VF         host PCI address not known yet")
}

// TestRender_JSONGoldens pins the --format json schema: camelCase keys, no nulls. Run with -update
// to rewrite after an intended change, and review the diff.
func TestRender_JSONGoldens(t *testing.T) {
	for name, fx := range renderFixtures(t) {
		t.Run(name, func(t *testing.T) {
			_, stdout, _ := runCapture("--pod", fx[0], "--vmi", fx[1], "--format", "json")
			golden := filepath.Join("testdata", "render-golden", name+".json")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, []byte(stdout), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -run TestRender_JSONGoldens -update")
			assert.Equal(t, string(want), stdout)
			assert.NotContains(t, stdout, "null", "no nulls")
			var doc any
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
			checkCamelCase(t, doc, "")
		})
	}
}

// checkCamelCase walks the report, except the payloads it carries verbatim (interface cache data).
func checkCamelCase(t *testing.T, v any, path string) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			assert.False(t, k[0] >= 'A' && k[0] <= 'Z' || strings.ContainsAny(k, "_-"), "key %s%s is not camelCase", path, k)
			if k == "data" {
				continue
			}
			checkCamelCase(t, child, path+k+".")
		}
	case []any:
		for _, child := range x {
			checkCamelCase(t, child, path)
		}
	case nil:
		t.Errorf("null at %s", path)
	}
}
