package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRender_Sample_ShowsEveryOutputForBothInterfaces(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, runRender([]string{"--sample"}, &out, &errOut), errOut.String())
	text := out.String()
	for _, want := range []string{
		`VMI tenant-a/vm-sriov: 2 interface(s) bound to "sriov-udn"`,
		"02:00:00:aa:01:01 (from vmi)",
		"02:00:00:aa:02:01 (from network-status)",
		"DHCP (pod-networks ipam_mode)",
		`<alias name="ua-sriov-sriov-l2">`,
		`bus="0x65" slot="0x00" function="0x2"`,
		"== NoCloud network-config",
		"pod-network NIC default (02:00:00:00:00:0a): DHCPv4",
		"192.168.50.7/24",
		"fd50:0:0:1::7/64",
		"== ConfigDrive network_data.json",
		`"podIPs":["192.168.50.7","fd50:0:0:1::7"]`,
	} {
		assert.Contains(t, text, want)
	}
}

func TestRender_JSONFormatIsMachineReadable(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, runRender([]string{"--sample", "--format", "json"}, &out, &errOut), errOut.String())
	var r rendered
	require.NoError(t, json.Unmarshal(out.Bytes(), &r))
	assert.Len(t, r.Interfaces, 2)
	assert.Equal(t, "02:00:00:aa:01:01", r.Interfaces[0].MAC, "MACs as text, not base64")
	assert.Empty(t, r.Missing)
	assert.Len(t, r.InterfaceCache, 2)
	assert.Contains(t, r.NoCloudNetwork, `"version": 1`, "NoCloud config is JSON, which is YAML too (pkg/cloudinit doc.go)")
}

func TestRender_PodWithoutNetworkStatus_ListsWhatTheHooksWouldWaitFor(t *testing.T) {
	dir := t.TempDir()
	pod := filepath.Join(dir, "pod.yaml")
	require.NoError(t, os.WriteFile(pod, []byte("kind: Pod\nmetadata:\n  annotations: {}\n"), 0o600))
	vmi := filepath.Join(dir, "vmi.json")
	raw, err := samples.ReadFile("samples/vmi.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(vmi, raw, 0o600))

	var out, errOut bytes.Buffer
	require.Equal(t, 0, runRender([]string{"--pod", pod, "--vmi", vmi}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "== still missing")
	assert.Contains(t, out.String(), "interface sriov-l2 (network sriov-l2)")
	assert.NotContains(t, out.String(), "== NoCloud")
}

func TestRender_BadInput_ClearErrorAndUsageExitCode(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"kind":"VirtualMachineInstance","spec":`), 0o600))
	notVMI := filepath.Join(dir, "pod.json")
	require.NoError(t, os.WriteFile(notVMI, []byte(`{"kind":"Pod"}`), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no vmi", []string{"--pod", notVMI}, "--vmi is required"},
		{"both pod sources", []string{"--vmi", bad, "--pod", notVMI, "--pod-info-dir", dir}, "exactly one of"},
		{"truncated vmi", []string{"--vmi", bad, "--pod", notVMI}, "VMI " + bad},
		{"wrong kind", []string{"--vmi", notVMI, "--pod", notVMI}, `kind is "Pod", want VirtualMachineInstance`},
		{"missing file", []string{"--vmi", filepath.Join(dir, "absent"), "--pod", notVMI}, "no such file"},
		{"bad format", []string{"--sample", "--format", "xml"}, `invalid --format "xml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, 2, runRender(tc.args, &out, &errOut))
			assert.Contains(t, errOut.String(), tc.want)
		})
	}
}
