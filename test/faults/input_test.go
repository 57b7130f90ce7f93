package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// Hostile and faulty inputs against the built binary, each request built as
// virt-launcher builds it (json.Marshal of KubeVirt's own CloudInitData).

// ciData is virt-launcher's CloudInitData JSON for dataSource with userData.
func ciData(t *testing.T, dataSource cloudinit.DataSourceType, userData string) []byte {
	t.Helper()
	d := &cloudinit.CloudInitData{DataSource: dataSource, UserData: userData, VolumeName: "cloudinitdisk"}
	if dataSource == cloudinit.DataSourceConfigDrive {
		d.ConfigDriveMetaData = &cloudinit.ConfigDriveMetadata{InstanceID: "vm-sriov.tenant-a", UUID: "5d0c6a1e-2b9f-4c61-9d0e-7f3b8c1a2e44"}
	} else {
		d.NoCloudMetaData = &cloudinit.NoCloudMetadata{InstanceID: "vm-sriov.tenant-a"}
	}
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	return raw
}

// answer calls PreCloudInitIso and returns the answer's CloudInitData as KubeVirt decodes it.
func answer(t *testing.T, socket string, vmiJSON, data []byte) (*cloudinit.CloudInitData, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := dial(t, socket)
	defer closeAfter(conn)
	res, err := hooksv1alpha3.NewCallbacksClient(conn).PreCloudInitIso(ctx, &hooksv1alpha3.PreCloudInitIsoParams{Vmi: vmiJSON, CloudInitData: data})
	if err != nil {
		return nil, err
	}
	var out cloudinit.CloudInitData
	require.NoError(t, json.Unmarshal(res.GetCloudInitData(), &out))
	return &out, nil
}

func startWithSamples(t *testing.T) (*harness.Pod, samples, *harness.Process) {
	t.Helper()
	s := loadSamples(t)
	l := newLayout(t)
	kubeletPodInfo(t, l, s.annotations)
	return l, s, start(t, l, "--wait-timeout", "2s")
}

// A request past the receive limit (27.1 MiB, docs/footprint.md "What a hook call may carry") is refused before it costs memory, with the
// sidecar's own log line naming the hook and the limit.
func TestInput_RequestPastTheLimit_RefusedWithALogLine(t *testing.T) {
	l, s, proc := startWithSamples(t)
	big := bytes.Repeat([]byte("<"), 28<<20)
	_, err := answer(t, l.Socket(), s.vmiJSON, big)
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	line, err := proc.WaitLog(msgIs("hook call refused"), logWait)
	require.NoError(t, err)
	assert.Equal(t, "PreCloudInitIso", line["hook"])
	assert.Contains(t, line["error"], "larger than max", "gRPC's own refusal, from the length prefix")
	assert.Contains(t, line["error"], "vs. 28377088)", "the size and the limit (pkg/hooks MaxRequestBytes)")
	assert.Less(t, procStatusKiB(t, proc.Pid(), "VmHWM"), 32<<10, "refused before it was read")
}

// Binary user data, as KubeVirt's JSON delivers it: gzip refused saying why; Latin-1 warned and kept.
func TestInput_MangledUserData_GzipRefused_Latin1Warned(t *testing.T) {
	l, s, proc := startWithSamples(t)
	gz := string([]byte{0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd})
	_, err := answer(t, l.Socket(), s.vmiJSON, ciData(t, cloudinit.DataSourceNoCloud, gz))
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "gzip")
	assert.Contains(t, status.Convert(err).Message(), "uncompressed")

	out, err := answer(t, l.Socket(), s.vmiJSON, ciData(t, cloudinit.DataSourceNoCloud, "#!/bin/sh\necho caf\xe9\n"))
	require.NoError(t, err)
	assert.Contains(t, out.UserData, "sriov-udn-binding-network-every-boot.cfg")
	line, err := proc.WaitLog(func(m map[string]any) bool { return m["code"] == "user-data-not-utf8" }, logWait)
	require.NoError(t, err)
	assert.Equal(t, "WARN", line["level"])
}

// A mention of our parts' file names in the user's text turns nothing off.
func TestInput_UserTextMentionsOurFileNames_OurPartsStillAdded(t *testing.T) {
	l, s, _ := startWithSamples(t)
	out, err := answer(t, l.Socket(), s.vmiJSON, ciData(t, cloudinit.DataSourceNoCloud,
		"#!/bin/sh\n# not sriov-udn-binding-network-every-boot.cfg\n"))
	require.NoError(t, err)
	assert.Contains(t, out.UserData, `filename="sriov-udn-binding-network-every-boot.cfg"`)

	var vmi map[string]any
	require.NoError(t, json.Unmarshal(s.vmiJSON, &vmi))
	meta := vmi["metadata"].(map[string]any)
	meta["annotations"] = map[string]any{"sriov-udn.kubevirt.io/windows-network-script": "true"}
	withScript, err := json.Marshal(vmi)
	require.NoError(t, err)
	out, err = answer(t, l.Socket(), withScript, ciData(t, cloudinit.DataSourceConfigDrive, "#ps1_sysnative\n# runs after sriov-udn-network.ps1\n"))
	require.NoError(t, err)
	assert.Contains(t, out.UserData, `filename="sriov-udn-network.ps1"`)
}

// The user's write_files entry for our ConfigDrive drop-in wins, with a warning.
func TestInput_UsersDropInEntry_WinsWithAWarning(t *testing.T) {
	l, s, proc := startWithSamples(t)
	user := "#cloud-config\nwrite_files:\n- path: /etc/systemd/system/cloud-init-local.service.d/50-sriov-udn-binding.conf\n  content: mine\n"
	out, err := answer(t, l.Socket(), s.vmiJSON, ciData(t, cloudinit.DataSourceConfigDrive, user))
	require.NoError(t, err)
	assert.Equal(t, user, out.UserData)
	_, err = proc.WaitLog(func(m map[string]any) bool { return m["code"] == "user-drop-in-wins" }, logWait)
	require.NoError(t, err)
}

// fixturePod reads one of render's fixtures: the pod's annotations and the VMI JSON.
func fixturePod(t *testing.T, name string) (map[string]string, []byte) {
	t.Helper()
	dir := filepath.Join(harness.RepoRoot(), "cmd", "sidecar", "testdata", "render", name)
	raw, err := os.ReadFile(filepath.Join(dir, "pod.json"))
	require.NoError(t, err)
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(raw, &pod))
	vmi, err := os.ReadFile(filepath.Join(dir, "vmi.json"))
	require.NoError(t, err)
	return pod.Metadata.Annotations, vmi
}

// Two primaries in pod-networks and no default entry: the same error naming both on every call, and
// OnDefineDomain the same answer on every call. An invalid entry of another network changes nothing.
func TestInput_AmbiguousPodNIC_OneAnswerEveryCall_ForeignEntriesIgnored(t *testing.T) {
	ann, vmiJSON := fixturePod(t, "pod-nic-two-primaries")
	l := newLayout(t)
	kubeletPodInfo(t, l, ann)
	require.NoError(t, os.MkdirAll(l.DeviceInfoDir, 0o755))
	start(t, l, "--wait-timeout", "2s")
	client := hooksv1alpha3.NewCallbacksClient(dial(t, l.Socket()))
	var firstErr, firstDomain string
	for i := range 12 {
		_, err := answer(t, l.Socket(), vmiJSON, ciData(t, cloudinit.DataSourceNoCloud, "#cloud-config\n"))
		require.Error(t, err)
		msg := status.Convert(err).Message()
		assert.Contains(t, msg, `"tenant-a/udn-blue"`)
		assert.Contains(t, msg, `"tenant-a/udn-green"`)
		res, err := client.OnDefineDomain(context.Background(), &hooksv1alpha3.OnDefineDomainParams{Vmi: vmiJSON,
			DomainXML: []byte("<domain type='kvm'><devices><interface type='ethernet'><alias name='ua-default'/></interface></devices></domain>")})
		require.NoError(t, err)
		if i == 0 {
			firstErr, firstDomain = msg, string(res.GetDomainXML())
			continue
		}
		require.Equal(t, firstErr, msg, "call %d", i)
		require.Equal(t, firstDomain, string(res.GetDomainXML()), "call %d", i)
	}

	ann, vmiJSON = fixturePod(t, "foreign-entry-invalid")
	l2 := newLayout(t)
	kubeletPodInfo(t, l2, ann)
	start(t, l2, "--wait-timeout", "2s")
	out, err := answer(t, l2.Socket(), vmiJSON, ciData(t, cloudinit.DataSourceNoCloud, "#cloud-config\n"))
	require.NoError(t, err, "a bad entry of a network that is not ours is not our business")
	assert.True(t, strings.Contains(out.NetworkData, "02:00:00:aa:01:01"))
}
