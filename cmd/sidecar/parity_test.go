package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/binding"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// formatMap writes a map as kubelet's fieldpath.FormatMap does: key="<Go-quoted value>" lines, keys
// sorted, no trailing newline.
func formatMap(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return []byte(strings.Join(lines, "\n"))
}

// notifyingCache is the real cache writer, telling the test when the hook's refresher has synced.
type notifyingCache struct {
	*ifacecache.Writer
	synced chan struct{}
}

func (c notifyingCache) Sync(uid string, spec []model.Interface, bound []model.BoundInterface, primary model.Family) (ifacecache.SyncResult, error) {
	res, err := c.Writer.Sync(uid, spec, bound, primary)
	select {
	case c.synced <- struct{}{}:
	default:
	}
	return res, err
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRenderAndHooks_SameAnswerOnEveryFixture runs render and the real hook Binding (reading the pod's
// labels and annotations through the real DownwardAPI watcher, writing the cache with the real writer)
// on every pod/VMI fixture, and asserts the same network data, hostdevs, cache entries, warnings,
// missing items and failures.
func TestRenderAndHooks_SameAnswerOnEveryFixture(t *testing.T) {
	for name, fx := range renderFixtures(t) {
		t.Run(name, func(t *testing.T) {
			podRaw, err := os.ReadFile(fx[0])
			require.NoError(t, err)
			vmiRaw, err := os.ReadFile(fx[1])
			require.NoError(t, err)
			vmi, err := decodeVMI(vmiRaw)
			require.NoError(t, err)
			snap, err := snapshotFromPod(podRaw)
			require.NoError(t, err)
			opts := model.Options{BindingName: "sriov-udn"}
			r := render(vmi, snap, opts)

			// The hook side: the pod's metadata as a pod-info DownwardAPI volume.
			var pod struct {
				Metadata struct {
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(podRaw, &pod))
			podInfo := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(podInfo, downwardapi.LabelsFile), formatMap(pod.Metadata.Labels), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(podInfo, downwardapi.AnnotationsFile), formatMap(pod.Metadata.Annotations), 0o644))
			w, err := downwardapi.NewWatcher(downwardapi.Config{PodInfoDir: podInfo})
			require.NoError(t, err)
			defer w.Close()
			cacheDir := t.TempDir()
			cache := notifyingCache{Writer: ifacecache.NewWriter(cacheDir, nil), synced: make(chan struct{}, 1)}
			var logs lockedBuffer
			b, err := binding.New(binding.Config{
				Options: opts, WaitTimeout: 100 * time.Millisecond, Snapshots: w, Cache: cache,
				Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			refresherDone := make(chan struct{})
			go func() { b.RefreshCache(ctx); close(refresherDone) }()
			// The refresher may still be writing into cacheDir: stop it before TempDir's cleanup removes it.
			defer func() { cancel(); <-refresherDone }()

			ciData, _, _, hasVolume, err := pipeline.VolumeCloudInitData(vmi)
			require.NoError(t, err)
			// The VMI as virt-launcher sends it: JSON, as the fixture has it.
			vmiJSON, err := objectJSON(vmiRaw, "VirtualMachineInstance", "spec", "")
			require.NoError(t, err)

			var ciErr, domErr error
			var ciOut, domOut []byte
			if hasVolume {
				ciOut, ciErr = b.PreCloudInitIso(ctx, vmiJSON, ciData)
			}
			domOut, domErr = b.OnDefineDomain(ctx, vmiJSON, []byte(pipeline.RenderDomainXML))

			switch r.Result {
			case "waiting":
				for hook, herr := range map[string]error{pipeline.PreCloudInitIso: ciErr, pipeline.OnDefineDomain: domErr} {
					var items []string
					for _, m := range r.Missing {
						if m.Hook == hook {
							items = append(items, m.Text)
						}
					}
					if len(items) == 0 {
						continue
					}
					require.Error(t, herr, hook)
					assert.Equal(t, codes.DeadlineExceeded, status.Code(herr), hook)
					msg := status.Convert(herr).Message()
					assert.Contains(t, msg, fmt.Sprintf("%d item(s)", len(items)), hook)
					for _, it := range items {
						assert.Contains(t, msg, it, hook)
					}
				}
			case "wouldFail":
				herr := map[string]error{pipeline.PreCloudInitIso: ciErr, pipeline.OnDefineDomain: domErr}[r.Failure.Hook]
				require.Error(t, herr)
				// The one difference is where the annotations came from: the pod object, or the
				// pod-info file the hook read.
				msg := strings.ReplaceAll(status.Convert(herr).Message(), "pod-info file "+filepath.Join(podInfo, downwardapi.AnnotationsFile), "pod annotations")
				assert.Equal(t, r.Failure.Message, msg, "the same message")
			case "rendered":
				require.NoError(t, ciErr)
				require.NoError(t, domErr)
				if hasVolume {
					var out struct{ NetworkData string }
					require.NoError(t, json.Unmarshal(ciOut, &out))
					require.NotNil(t, r.CloudInit)
					assert.Equal(t, r.CloudInit.NetworkData, out.NetworkData, "network data")
				} else {
					assert.Nil(t, r.CloudInit)
				}
				if len(r.BoundInterfaces) == 0 {
					assert.Equal(t, pipeline.RenderDomainXML, string(domOut), "nothing bound: the domain passes through")
					assert.Empty(t, r.InterfaceCache)
				} else {
					assert.Equal(t, r.DomainXML, string(domOut), "hostdevs")
					select {
					case <-cache.synced:
					case <-time.After(10 * time.Second):
						t.Fatal("the hook's cache refresher never synced")
					}
					got := map[string]string{}
					files, err := filepath.Glob(filepath.Join(cacheDir, vmi.UID, "*"))
					require.NoError(t, err)
					for _, f := range files {
						raw, err := os.ReadFile(f)
						require.NoError(t, err)
						got[vmi.UID+"/"+filepath.Base(f)] = string(bytes.TrimSpace(raw))
					}
					want := map[string]string{}
					for _, e := range r.InterfaceCache {
						want[e.Path] = string(e.Data)
					}
					assert.Equal(t, want, got, "cache entries")
				}
				// Every warning render shows is a WARN line of the hook, with its fields.
				var logged []string
				for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
					var rec map[string]any
					if json.Unmarshal([]byte(line), &rec) == nil && rec["level"] == "WARN" && rec["code"] != nil {
						logged = append(logged, fmt.Sprintf("%s/%s", rec["code"], rec["interface"]))
					}
				}
				for _, wr := range r.Warnings {
					assert.Contains(t, logged, wr.Code+"/"+wr.Interface, "warning in the hook's log")
				}
				if len(r.Warnings) == 0 {
					assert.Empty(t, logged)
				}
			default:
				t.Fatalf("result %q", r.Result)
			}
		})
	}
}

// The pod-info directory form reads the same data as the Pod object: the same JSON report.
func TestRender_PodInfoDir_SameReportAsPod(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("samples", "pod.json"))
	require.NoError(t, err)
	var pod struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(raw, &pod))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, downwardapi.LabelsFile), formatMap(pod.Metadata.Labels), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, downwardapi.AnnotationsFile), formatMap(pod.Metadata.Annotations), 0o644))
	vmi := filepath.Join("samples", "vmi.json")
	code, fromDir, stderr := runCapture("--pod-info-dir", dir, "--vmi", vmi, "--format", "json")
	require.Equal(t, exitRendered, code, stderr)
	code, fromPod, stderr := runCapture("--pod", filepath.Join("samples", "pod.json"), "--vmi", vmi, "--format", "json")
	require.Equal(t, exitRendered, code, stderr)
	assert.JSONEq(t, fromPod, fromDir)
}
