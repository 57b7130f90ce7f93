package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// A sidecar whose container has no pod-info volume says so at start, naming the prerequisite, once.
func TestWatch_PodInfoVolumeAbsent_LogsThePrerequisiteAtStart(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	dir := t.TempDir()
	w, err := Watch(Sources{DeviceInfoFile: filepath.Join(dir, "network-info"), PodInfoDir: filepath.Join(dir, "podinfo")}, logger)
	require.NoError(t, err)
	defer w.Close()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == "pod-info volume absent" {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 1, "log:\n%s", buf.String())
	assert.Equal(t, "INFO", lines[0]["level"])
	assert.Equal(t, filepath.Join(dir, "podinfo"), lines[0]["dir"])
	assert.Contains(t, lines[0]["cause"], "MutatingAdmissionPolicy sriov-udn-binding-podinfo.kubevirt.io")
	assert.Contains(t, lines[0]["cause"], "downwardAPI: pod-info")
}

// With the volume there (kubelet wrote labels and annotations), nothing is logged about it.
func TestWatch_PodInfoVolumePresent_NoPrerequisiteWarning(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	dir := t.TempDir()
	podInfo := filepath.Join(dir, "podinfo")
	require.NoError(t, os.MkdirAll(podInfo, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(podInfo, "labels"), []byte(`kubevirt.io="virt-launcher"`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(podInfo, "annotations"), []byte(`a="b"`), 0o644))
	w, err := Watch(Sources{DeviceInfoFile: filepath.Join(dir, "network-info"), PodInfoDir: podInfo}, logger)
	require.NoError(t, err)
	defer w.Close()
	assert.NotContains(t, buf.String(), "pod-info volume absent")
}

// A hook that waited in vain for the annotations names the absent volume and its prerequisite in its error,
// beside the items it waited for; with the volume there, the error lists the items alone.
func TestPreCloudInitIso_PodInfoAbsent_ErrorNamesThePrerequisite(t *testing.T) {
	_, vmi := loadSample(t)
	for name, snap := range map[string]*downwardapi.Snapshot{
		"absent":              {},
		"present, no entries": downwardapi.SnapshotFromMaps(nil, map[string]string{}),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := New(Config{Options: model.Options{BindingName: "sriov-udn"}, WaitTimeout: 50 * time.Millisecond,
				Snapshots: fixedSnapshots{snap: snap}})
			require.NoError(t, err)
			_, err = b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "k8s.v1.cni.cncf.io/network-status or k8s.ovn.org/pod-networks entry")
			if snap.PodInfo {
				assert.NotContains(t, err.Error(), "pod-info volume")
			} else {
				assert.Contains(t, err.Error(), "the pod-info volume (the pod's labels and annotations) is not mounted in this container")
				assert.Contains(t, err.Error(), "sriov-udn-binding-podinfo.kubevirt.io")
			}
		})
	}
}
