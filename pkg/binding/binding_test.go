package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// fixedSnapshots serves one snapshot, parsed by the real parsers from pod annotations. Wait
// returns at once when the snapshot satisfies need, else when ctx ends, like the watcher would
// with no further kubelet writes.
type fixedSnapshots struct{ snap *downwardapi.Snapshot }

func (f fixedSnapshots) Snapshot() *downwardapi.Snapshot { return f.snap }

func (f fixedSnapshots) Wait(ctx context.Context, need func(*downwardapi.Snapshot) []downwardapi.Missing) (*downwardapi.Snapshot, error) {
	missing := need(f.snap)
	if len(missing) == 0 {
		return f.snap, nil
	}
	<-ctx.Done()
	return nil, &downwardapi.MissingError{Items: missing, Err: ctx.Err()}
}

func (f fixedSnapshots) Next(ctx context.Context, after uint64) (*downwardapi.Snapshot, error) {
	if f.snap.Generation > after {
		return f.snap, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

type samplePod struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

func loadSample(t testing.TB) (map[string]string, []byte) {
	t.Helper()
	dir := filepath.Join("..", "..", "cmd", "sidecar", "samples")
	raw, err := os.ReadFile(filepath.Join(dir, "pod.json"))
	require.NoError(t, err)
	var pod samplePod
	require.NoError(t, json.Unmarshal(raw, &pod))
	vmi, err := os.ReadFile(filepath.Join(dir, "vmi.json"))
	require.NoError(t, err)
	return pod.Metadata.Annotations, vmi
}

func newTestBinding(t testing.TB, annotations map[string]string, cache CacheWriter) *Binding {
	t.Helper()
	snap := downwardapi.SnapshotFromMaps(nil, annotations)
	b, err := New(Config{
		Options:     model.Options{BindingName: "sriov-udn"},
		WaitTimeout: 200 * time.Millisecond,
		Snapshots:   fixedSnapshots{snap: snap},
		Cache:       cache,
	})
	require.NoError(t, err)
	return b
}

const noCloudInput = `{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"vm-sriov.tenant-a"},"ConfigDriveMetaData":null,"UserData":"#cloud-config\n","NetworkData":"","DevicesData":null,"VolumeName":"cloudinitdisk"}`

func TestBinding_VMIWithNoneOfOurs_PassesThroughByteForByte(t *testing.T) {
	b := newTestBinding(t, nil, nil)
	vmi := []byte(`{"metadata":{"name":"plain"},"spec":{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{}}]}},"networks":[{"name":"default","pod":{}}]}}`)
	data, err := b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
	require.NoError(t, err)
	assert.Equal(t, noCloudInput, string(data))
	dom := []byte("<domain type='kvm'><devices><hostdev/></devices></domain>")
	out, err := b.OnDefineDomain(context.Background(), vmi, dom)
	require.NoError(t, err)
	assert.Equal(t, dom, out)
}

func TestBinding_VMIWithNoneOfOurs_EmptyUserDataBecomesCloudConfigSoMetadataIsKept(t *testing.T) {
	b := newTestBinding(t, nil, nil)
	vmi := []byte(`{"spec":{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{}}]}},"networks":[{"name":"default","pod":{}}]}}`)
	in := `{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"i"},"UserData":"","NetworkData":"","VolumeName":"v"}`
	data, err := b.PreCloudInitIso(context.Background(), vmi, []byte(in))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, "#cloud-config\n", got["UserData"])
	assert.Equal(t, map[string]any{"instance-id": "i"}, got["NoCloudMetaData"])
}

func TestBinding_BadInput_ErrorCodes(t *testing.T) {
	annotations, vmi := loadSample(t)
	tests := []struct {
		name        string
		annotations map[string]string
		vmi         string
		call        string
		code        codes.Code
		want        []string
	}{
		{"truncated VMI JSON", annotations, `{"spec":`, "cloud-init", codes.InvalidArgument, []string{"decode VMI JSON"}},
		{"VMI JSON for domain", annotations, `[]`, "domain", codes.InvalidArgument, []string{"decode VMI JSON"}},
		{"data never arrives", map[string]string{}, string(vmi), "cloud-init", codes.DeadlineExceeded,
			[]string{"PreCloudInitIso: waited", "sriov-l2", "sriov-localnet", "tenant-a/l2-secondary"}},
		{"device-info never arrives", withoutDeviceInfo(annotations), string(vmi), "domain", codes.DeadlineExceeded,
			[]string{"OnDefineDomain: waited", "sriov-l2"}},
		{"malformed network-status fails at once", with(annotations, "k8s.v1.cni.cncf.io/network-status", `[{"name":`), string(vmi), "cloud-init", codes.FailedPrecondition,
			[]string{"k8s.v1.cni.cncf.io/network-status"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBinding(t, tc.annotations, nil)
			var err error
			start := time.Now()
			if tc.call == "cloud-init" {
				_, err = b.PreCloudInitIso(context.Background(), []byte(tc.vmi), []byte(noCloudInput))
			} else {
				_, err = b.OnDefineDomain(context.Background(), []byte(tc.vmi), []byte("<domain><devices></devices></domain>"))
			}
			require.Error(t, err)
			assert.Equal(t, tc.code, status.Code(err), err.Error())
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if tc.code == codes.FailedPrecondition {
				assert.Less(t, time.Since(start), 200*time.Millisecond, "a malformed source must not be waited out")
			}
		})
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for kk, vv := range m {
		if kk != k {
			out[kk] = vv
		}
	}
	return out
}

// withoutDeviceInfo drops every source of device-info: the network-info annotation and the
// device-info in network-status.
func withoutDeviceInfo(m map[string]string) map[string]string {
	out := with(m, "kubevirt.io/network-info", "")
	delete(out, "kubevirt.io/network-info")
	var statuses []map[string]any
	if err := json.Unmarshal([]byte(m["k8s.v1.cni.cncf.io/network-status"]), &statuses); err == nil {
		for _, s := range statuses {
			delete(s, "device-info")
		}
		raw, _ := json.Marshal(statuses)
		out["k8s.v1.cni.cncf.io/network-status"] = string(raw)
	}
	return out
}

type recordingCache struct {
	calls chan []model.BoundInterface
}

func (c *recordingCache) Sync(_ string, _ []model.Interface, bound []model.BoundInterface, _ model.Family) (ifacecache.SyncResult, error) {
	c.calls <- bound
	return ifacecache.SyncResult{}, nil
}

func TestBinding_RefreshCache_WritesAfterHookCallNotDuringIt(t *testing.T) {
	annotations, vmi := loadSample(t)
	cache := &recordingCache{calls: make(chan []model.BoundInterface, 4)}
	b := newTestBinding(t, annotations, cache)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { b.RefreshCache(ctx); close(done) }()

	_, err := b.PreCloudInitIso(ctx, vmi, []byte(noCloudInput))
	require.NoError(t, err)
	select {
	case bound := <-cache.calls:
		require.Len(t, bound, 2)
		assert.Equal(t, "sriov-l2", bound[0].Name)
	case <-time.After(5 * time.Second):
		t.Fatal("refresher did not write the cache after the hook call")
	}
	cancel()
	<-done
}

func TestBinding_PreCloudInitIso_MergesOurConfigAndKeepsMetadata(t *testing.T) {
	annotations, vmi := loadSample(t)
	b := newTestBinding(t, annotations, nil)
	data, err := b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, "cloudinitdisk", got["VolumeName"])
	assert.Equal(t, map[string]any{"instance-id": "vm-sriov.tenant-a"}, got["NoCloudMetaData"])
	// The user's "#cloud-config\n" travels as the first MIME part, beside ours that makes cloud-init apply
	// the network config at every boot (pkg/cloudinit userdata.go).
	assert.Contains(t, got["UserData"], "MIME-Version: 1.0")
	assert.Contains(t, got["UserData"], "\n\n#cloud-config\n\n--")
	assert.Contains(t, got["UserData"], "when: [boot-new-instance, boot]")
	assert.Contains(t, got["NetworkData"], `"02:00:00:aa:01:01"`)
}

func FuzzBinding_HooksNeverPanic(f *testing.F) {
	annotations, vmi := loadSample(f)
	f.Add(string(vmi), noCloudInput, "<domain><devices></devices></domain>", annotations["k8s.v1.cni.cncf.io/network-status"])
	f.Add(`{"spec":{"domain":{"devices":{"interfaces":[{"name":"x","binding":{"name":"sriov-udn"}}]}},"networks":[{"name":"x","multus":{"networkName":"a/b"}}]}}`, `{}`, `<domain/>`, `[]`)
	f.Add(`null`, `null`, ``, ``)
	f.Fuzz(func(t *testing.T, vmiJSON, cloudInit, domainXML, networkStatus string) {
		b := newTestBinding(t, with(annotations, "k8s.v1.cni.cncf.io/network-status", networkStatus), nil)
		b.cfg.WaitTimeout = time.Millisecond
		_, _ = b.PreCloudInitIso(context.Background(), []byte(vmiJSON), []byte(cloudInit))
		_, _ = b.OnDefineDomain(context.Background(), []byte(vmiJSON), []byte(domainXML))
	})
}

// network-status lists every network of the pod. An InfiniBand secondary network reports a 20-byte
// IPoIB hardware address; it is not ours and must not stop our interfaces (docs/design.md section 6: interfaces
// not bound to us are never touched).
func TestBinding_UnrelatedIPoIBNetworkInNetworkStatus_DoesNotBreakOurInterfaces(t *testing.T) {
	annotations, vmi := loadSample(t)
	var statuses []map[string]any
	require.NoError(t, json.Unmarshal([]byte(annotations["k8s.v1.cni.cncf.io/network-status"]), &statuses))
	statuses = append(statuses, map[string]any{
		"name": "tenant-a/ib", "interface": "pod7d7c2c2b1aa",
		"mac": "00:00:04:a5:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0f:6b:01",
	})
	raw, err := json.Marshal(statuses)
	require.NoError(t, err)
	b := newTestBinding(t, with(annotations, "k8s.v1.cni.cncf.io/network-status", string(raw)), nil)

	data, err := b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
	require.NoError(t, err)
	assert.Contains(t, string(data), "02:00:00:aa:01:01")
	out, err := b.OnDefineDomain(context.Background(), vmi, []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	assert.Contains(t, string(out), "ua-sriov-sriov-l2")
}

// panickyCache panics on its first Sync, then records.
type panickyCache struct {
	calls    chan []model.BoundInterface
	panicked chan struct{}
	first    bool
}

func (c *panickyCache) Sync(_ string, _ []model.Interface, bound []model.BoundInterface, _ model.Family) (ifacecache.SyncResult, error) {
	if !c.first {
		c.first = true
		close(c.panicked)
		panic("cache bug")
	}
	c.calls <- bound
	return ifacecache.SyncResult{}, nil
}

func TestBinding_RefreshCache_PanicInOneRefreshIsNotFatal(t *testing.T) {
	annotations, vmi := loadSample(t)
	cache := &panickyCache{calls: make(chan []model.BoundInterface, 4), panicked: make(chan struct{})}
	b := newTestBinding(t, annotations, cache)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { b.RefreshCache(ctx); close(done) }()

	_, err := b.PreCloudInitIso(ctx, vmi, []byte(noCloudInput))
	require.NoError(t, err)
	<-cache.panicked // the first refresh panics inside Sync ...
	_, err = b.PreCloudInitIso(ctx, vmi, []byte(noCloudInput))
	require.NoError(t, err)
	select { // ... and the refresher still serves the next one
	case bound := <-cache.calls:
		assert.Len(t, bound, 2)
	case <-done:
		t.Fatal("refresher died")
	case <-time.After(5 * time.Second):
		t.Fatal("no refresh after the panic")
	}
	cancel()
	<-done
}

func TestBinding_RefreshOnce_WritesOncePerVMIAndSnapshotGeneration(t *testing.T) {
	annotations, vmi := loadSample(t)
	cache := &recordingCache{calls: make(chan []model.BoundInterface, 8)}
	b := newTestBinding(t, annotations, cache)
	syncs := func() int { // refreshOnce runs synchronously here: no RefreshCache goroutine
		n := 0
		for {
			select {
			case <-cache.calls:
				n++
			default:
				return n
			}
		}
	}
	hook := func(vmiJSON []byte) {
		t.Helper()
		_, err := b.OnDefineDomain(context.Background(), vmiJSON, []byte("<domain><devices></devices></domain>"))
		require.NoError(t, err)
		b.refreshOnce()
	}

	hook(vmi)
	assert.Equal(t, 1, syncs(), "first hook call")
	hook(vmi)
	hook(append([]byte(nil), vmi...))
	assert.Equal(t, 0, syncs(), "OnDefineDomain again with an equal VMI: nothing to rewrite")

	next := *b.cfg.Snapshots.Snapshot()
	next.Generation++
	b.cfg.Snapshots = fixedSnapshots{snap: &next}
	b.refreshOnce()
	assert.Equal(t, 1, syncs(), "the annotations changed")

	var obj map[string]any
	require.NoError(t, json.Unmarshal(vmi, &obj))
	obj["metadata"].(map[string]any)["uid"] = "another-uid"
	changed, err := json.Marshal(obj)
	require.NoError(t, err)
	hook(changed)
	assert.Equal(t, 1, syncs(), "another VMI")
}

// BenchmarkBinding_PreCloudInitIso is the handler alone, data ready (the sample pod and VMI): the part
// of a hook call that is ours rather than gRPC's or the Manager's.
func BenchmarkBinding_PreCloudInitIso(b *testing.B) {
	annotations, vmi := loadSample(b)
	bd := newTestBinding(b, annotations, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bd.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput)); err != nil {
			b.Fatal(err)
		}
	}
}

// failingOnceCache fails its first Sync, then records.
type failingOnceCache struct {
	recordingCache
	failed bool
}

func (c *failingOnceCache) Sync(uid string, spec []model.Interface, bound []model.BoundInterface, f model.Family) (ifacecache.SyncResult, error) {
	if !c.failed {
		c.failed = true
		return ifacecache.SyncResult{}, errors.New("disk full")
	}
	return c.recordingCache.Sync(uid, spec, bound, f)
}

func TestBinding_RefreshOnce_RetriesAFailedWriteForTheSameVMIAndGeneration(t *testing.T) {
	annotations, vmi := loadSample(t)
	cache := &failingOnceCache{recordingCache: recordingCache{calls: make(chan []model.BoundInterface, 4)}}
	b := newTestBinding(t, annotations, cache)
	_, err := b.OnDefineDomain(context.Background(), vmi, []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	b.refreshOnce()
	require.True(t, cache.failed)
	assert.Empty(t, cache.calls, "the first write failed")
	b.refreshOnce() // same VMI, same generation: still not written, so tried again
	assert.Len(t, cache.calls, 1)
}

// Each warning of the pipeline is one WARN line with fields, never an annotation value.
func TestBinding_Warnings_OneWARNLineWithFieldsEach(t *testing.T) {
	annotations, vmi := loadSample(t)
	var logs bytes.Buffer
	b := newTestBinding(t, annotations, nil)
	b.log = slog.New(slog.NewJSONHandler(&logs, nil))

	// The VMI's macAddress of sriov-localnet differs from network-status; its user v2 data configures sriov-l2.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(vmi, &doc))
	ifaces := doc["spec"].(map[string]any)["domain"].(map[string]any)["devices"].(map[string]any)["interfaces"].([]any)
	ifaces[2].(map[string]any)["macAddress"] = "02:00:00:aa:02:99"
	mutated, err := json.Marshal(doc)
	require.NoError(t, err)
	in, err := json.Marshal(map[string]string{"DataSource": "noCloud", "UserData": "#cloud-config\n",
		"NetworkData": "version: 2\nethernets:\n  mine:\n    match: {macaddress: \"02:00:00:aa:01:01\"}\n"})
	require.NoError(t, err)
	_, err = b.PreCloudInitIso(context.Background(), mutated, in)
	require.NoError(t, err)

	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["level"] == "WARN" {
			got = append(got, rec)
		}
	}
	require.Len(t, got, 2, logs.String())
	codes := map[string]string{}
	for _, rec := range got {
		assert.Equal(t, "PreCloudInitIso", rec["hook"])
		assert.Equal(t, "tenant-a/vm-sriov", rec["vmi"])
		assert.NotEmpty(t, rec["detail"])
		codes[rec["code"].(string)] = rec["interface"].(string)
	}
	assert.Equal(t, map[string]string{"mac-mismatch": "sriov-localnet", "user-network-data-wins": "sriov-l2"}, codes)
	assert.NotContains(t, logs.String(), "02:00:00:aa:02:01", "the network-status MAC (an annotation value) is not logged")

	// Nothing bound (a wrong binding name) is a warning too, from either hook.
	logs.Reset()
	b.cfg.Options.BindingName = "sriov"
	_, err = b.OnDefineDomain(context.Background(), vmi, []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	assert.Contains(t, logs.String(), `"level":"WARN"`)
	assert.Contains(t, logs.String(), `"code":"nothing-bound"`)
}

func TestBinding_RefreshCache_FailedWriteRetriedWithoutHookCallOrDataChange(t *testing.T) {
	annotations, vmi := loadSample(t)
	cache := &failingOnceCache{recordingCache: recordingCache{calls: make(chan []model.BoundInterface, 4)}}
	b := newTestBinding(t, annotations, cache)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.RefreshCache(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	_, err := b.OnDefineDomain(ctx, vmi, []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	select {
	case bound := <-cache.calls:
		assert.Len(t, bound, 2)
	case <-time.After(3 * cacheRetryFirst):
		t.Fatal("the failed write was not retried")
	}
}
