// Package downwardapi_test drives pkg/downwardapi with kubelet's own DownwardAPI writer
// (k8s.io/kubernetes pkg/volume/util AtomicWriter) and formatter (pkg/fieldpath FormatMap).
package downwardapi_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// testTimeout bounds every wait; a pass never comes near it.
const testTimeout = 10 * time.Second

// newVolume is a DownwardAPI volume written the way kubelet writes it (harness.Volume: kubelet's AtomicWriter
// and FormatMap, the items KubeVirt's pod-info and device-info volumes project).
func newVolume(t testing.TB, dir string) *harness.Volume {
	t.Helper()
	v, err := harness.NewVolume(dir)
	require.NoError(t, err)
	return v
}

func newWatcher(t testing.TB, cfg downwardapi.Config) *downwardapi.Watcher {
	t.Helper()
	w, err := downwardapi.NewWatcher(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, w.Close()) })
	return w
}

func wait(t testing.TB, w *downwardapi.Watcher, need func(*downwardapi.Snapshot) []downwardapi.Missing) *downwardapi.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := w.Wait(ctx, need)
	require.NoError(t, err)
	return s
}

func needAnnotations(want map[string]string) func(*downwardapi.Snapshot) []downwardapi.Missing {
	return func(s *downwardapi.Snapshot) []downwardapi.Missing {
		if !s.PodInfo || !maps.Equal(s.Annotations, want) {
			return []downwardapi.Missing{{Source: downwardapi.AnnotationsFile, Field: "expected content"}}
		}
		return nil
	}
}

func needDeviceInfo(network string) func(*downwardapi.Snapshot) []downwardapi.Missing {
	return func(s *downwardapi.Snapshot) []downwardapi.Missing {
		if s.DeviceInfo != nil {
			for _, i := range s.DeviceInfo.Interfaces {
				if i.Network == network && i.DeviceInfo != nil && i.DeviceInfo.Pci != nil {
					return nil
				}
			}
		}
		return []downwardapi.Missing{{Interface: "sriov", Network: network, Source: "/etc/podinfo/network-info", Field: "deviceInfo.pci.pci-address"}}
	}
}

const networkInfo = `{"interfaces":[{"network":"sriov-vfio","deviceInfo":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:c4:02.5"}},"mac":"ea:6e:3a:8b:ed:27"}]}`

func TestKubeletVolume_DeviceInfoEmptyThenAnnotated_WaitReturnsPCIAddress(t *testing.T) {
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	require.NoError(t, vol.WriteDeviceInfo("")) // virt-controller has not written the annotation yet
	w := newWatcher(t, downwardapi.Config{DeviceInfoFile: filepath.Join(vol.Dir(), "network-info")})
	require.Nil(t, w.Snapshot().DeviceInfo)
	require.Empty(t, w.Snapshot().Problems, "an empty file is 'not yet', not an error")

	got := make(chan *downwardapi.Snapshot, 1)
	go func() {
		s, _ := w.Wait(context.Background(), needDeviceInfo("sriov-vfio"))
		got <- s
	}()
	require.NoError(t, vol.WriteDeviceInfo(networkInfo))
	select {
	case s := <-got:
		require.NotNil(t, s)
		assert.Equal(t, "0000:c4:02.5", s.DeviceInfo.Interfaces[0].DeviceInfo.Pci.PciAddress)
		assert.Equal(t, "ea:6e:3a:8b:ed:27", s.DeviceInfo.Interfaces[0].Mac)
	case <-time.After(testTimeout):
		t.Fatal("Wait did not return after kubelet projected the annotation")
	}
}

func TestKubeletVolume_DeviceInfoFileAppearsLate_WaitReturns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "podinfo")
	w := newWatcher(t, downwardapi.Config{DeviceInfoFile: filepath.Join(dir, "network-info")})
	assert.Nil(t, w.Snapshot().DeviceInfo)

	vol := newVolume(t, dir) // the volume directory itself appears only now
	require.NoError(t, vol.WriteDeviceInfo(networkInfo))
	wait(t, w, needDeviceInfo("sriov-vfio"))
}

func TestKubeletVolume_WaitTimesOut_ErrorListsEveryMissingItem(t *testing.T) {
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	require.NoError(t, vol.WriteDeviceInfo(""))
	w := newWatcher(t, downwardapi.Config{DeviceInfoFile: filepath.Join(vol.Dir(), "network-info")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := w.Wait(ctx, func(s *downwardapi.Snapshot) []downwardapi.Missing {
		return append(needDeviceInfo("net-a")(s), needDeviceInfo("net-b")(s)...)
	})
	var me *downwardapi.MissingError
	require.ErrorAs(t, err, &me)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "\n  interface sriov (network net-a): /etc/podinfo/network-info deviceInfo.pci.pci-address")
	assert.Contains(t, err.Error(), "\n  interface sriov (network net-b): /etc/podinfo/network-info deviceInfo.pci.pci-address")
}

func TestKubeletVolume_AnnotationAddedChangedRemoved_EachStateObserved(t *testing.T) {
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	labels := map[string]string{"kubevirt.io": "virt-launcher"}
	base := map[string]string{"kubevirt.io/domain": "vm1"}
	require.NoError(t, vol.WritePodInfo(labels, base))
	w := newWatcher(t, downwardapi.Config{PodInfoDir: vol.Dir()})
	require.True(t, w.Snapshot().PodInfo)
	require.Equal(t, labels, w.Snapshot().Labels)

	added := maps.Clone(base)
	added[downwardapi.PodNetworksAnnotation] = `{"default":{"ip_addresses":["10.244.0.3/24"],"mac_address":"0a:58:0a:f4:00:03","role":"primary"}}`
	require.NoError(t, vol.WritePodInfo(labels, added))
	s := wait(t, w, needAnnotations(added))
	require.Contains(t, s.PodNetworks, "default")
	assert.Equal(t, "10.244.0.3/24", s.PodNetworks["default"].IPAddresses[0].String())

	changed := maps.Clone(base)
	changed[downwardapi.PodNetworksAnnotation] = `{"default":{"ip_addresses":["10.244.0.9/24"],"mac_address":"0a:58:0a:f4:00:09","role":"primary"}}`
	require.NoError(t, vol.WritePodInfo(labels, changed))
	s = wait(t, w, needAnnotations(changed))
	assert.Equal(t, "10.244.0.9/24", s.PodNetworks["default"].IPAddresses[0].String())

	require.NoError(t, vol.WritePodInfo(labels, base))
	s = wait(t, w, needAnnotations(base))
	assert.Nil(t, s.PodNetworks, "a removed annotation leaves its typed field nil")
}

func TestKubeletVolume_HostileValues_RoundTripExactly(t *testing.T) {
	annotations := map[string]string{
		"quotes":      `he said "hi" and 'bye'`,
		"backslashes": `C:\path\to\ \\server \" \n literal`,
		"newlines":    "line1\nline2\r\nline3\n",
		"unicode":     "héllo 世界 🚀 \u200b\u202e",
		"control":     "\x00\x01\x7f\t",
		"invalid-utf": "\xff\xfe\xc3",
		"equals":      "a=b=c",
		"empty":       "",
		"json":        "[{\n    \"name\": \"ns/a\",\n    \"ips\": [\n        \"10.0.0.1\"\n    ]\n}]",
	}
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	w := newWatcher(t, downwardapi.Config{PodInfoDir: vol.Dir()})
	require.NoError(t, vol.WritePodInfo(map[string]string{"l": "\"\\\n"}, annotations))
	s := wait(t, w, needAnnotations(annotations))
	assert.Equal(t, map[string]string{"l": "\"\\\n"}, s.Labels)
	assert.Empty(t, s.Problems)
}

func TestKubeletVolume_200Annotations_AllParsed(t *testing.T) {
	annotations := make(map[string]string, 200)
	for i := range 200 {
		annotations[fmt.Sprintf("example.com/key-%03d", i)] = strings.Repeat(fmt.Sprintf("v%d\"\\\n", i), i%17)
	}
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	w := newWatcher(t, downwardapi.Config{PodInfoDir: vol.Dir()})
	require.NoError(t, vol.WritePodInfo(nil, annotations))
	s := wait(t, w, needAnnotations(annotations))
	assert.Len(t, s.Annotations, 200)
}

func TestKubeletVolume_UnchangedRewrite_PublishesNothing(t *testing.T) {
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	labels := map[string]string{"a": "1"}
	annotations := map[string]string{"b": "2"}
	require.NoError(t, vol.WritePodInfo(labels, annotations))
	w := newWatcher(t, downwardapi.Config{PodInfoDir: vol.Dir()})
	gen := w.Snapshot().Generation

	for range 10 {
		require.NoError(t, vol.WritePodInfo(labels, annotations)) // kubelet re-syncs the pod with nothing new
	}
	next := map[string]string{"b": "3"}
	require.NoError(t, vol.WritePodInfo(labels, next))
	s := wait(t, w, needAnnotations(next))
	// Events are handled in order, so anything the identical writes caused was handled before this.
	assert.Equal(t, gen+1, s.Generation, "only the real change published a snapshot")
}

func TestKubeletVolume_AnnotationsParsedIntoTypes(t *testing.T) {
	annotations := map[string]string{
		downwardapi.NetworkInfoAnnotation:   networkInfo,
		downwardapi.NetworkStatusAnnotation: "[{\n    \"name\": \"ns1/sriov-net\",\n    \"interface\": \"pod16477688c0e\",\n    \"ips\": [\n        \"10.1.192.213\"\n    ],\n    \"mac\": \"02:00:00:00:20:08\",\n    \"dns\": {},\n    \"device-info\": {\n        \"type\": \"pci\",\n        \"version\": \"1.1.0\",\n        \"pci\": {\n            \"pci-address\": \"0000:65:00.2\"\n        }\n    }\n}]",
		downwardapi.PodNetworksAnnotation:   `{"default/ovn-localnet-dhcp-vfio":{"ip_addresses":null,"mac_address":"02:00:00:00:20:08","role":"secondary","ipam_mode":"dhcp"}}`,
	}
	vol := newVolume(t, filepath.Join(t.TempDir(), "podinfo"))
	require.NoError(t, vol.WritePodInfo(nil, annotations))
	w := newWatcher(t, downwardapi.Config{PodInfoDir: vol.Dir()})
	s := w.Snapshot()
	require.Empty(t, s.Problems)
	require.NotNil(t, s.NetworkInfo)
	assert.Equal(t, "sriov-vfio", s.NetworkInfo.Interfaces[0].Network)
	require.Len(t, s.NetworkStatus, 1)
	assert.Equal(t, "0000:65:00.2", s.NetworkStatus[0].DeviceInfo.Pci.PciAddress)
	assert.Equal(t, "dhcp", s.PodNetworks["default/ovn-localnet-dhcp-vfio"].IPAMMode)
}

func TestKubeletVolume_VolumeRemoved_SourceBecomesUnavailable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "podinfo")
	vol := newVolume(t, dir)
	require.NoError(t, vol.WritePodInfo(nil, map[string]string{"a": "1"}))
	w := newWatcher(t, downwardapi.Config{PodInfoDir: dir})
	require.True(t, w.Snapshot().PodInfo)

	require.NoError(t, os.RemoveAll(dir))
	wait(t, w, func(s *downwardapi.Snapshot) []downwardapi.Missing {
		if s.PodInfo {
			return []downwardapi.Missing{{Source: dir, Field: "removal"}}
		}
		return nil
	})

	vol = newVolume(t, dir)
	require.NoError(t, vol.WritePodInfo(nil, map[string]string{"a": "again"}))
	wait(t, w, needAnnotations(map[string]string{"a": "again"}))
}
