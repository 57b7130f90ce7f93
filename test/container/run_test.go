package container

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks"
	kvcache "kubevirt.io/kubevirt/pkg/network/cache"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// answers is everything a sidecar told KubeVirt in one scenario.
type answers struct {
	Info       infoAnswer
	CloudInit  *cloudinit.CloudInitData
	DomainXML  string
	IfaceCache map[string]*kvcache.PodIfaceCacheData
	ExitCode   int
}

// infoAnswer is the Info reply without its protobuf internals.
type infoAnswer struct {
	Name       string
	Versions   []string
	HookPoints map[string]int32
}

// boundIfaces are the sample VMI's interfaces bound to sriov-udn.
var boundIfaces = []string{"sriov-l2", "sriov-localnet"}

// drive runs one virt-launcher start against the sidecar start() launches on p: Info as the Manager's
// Collect makes it, PreCloudInitIso called before Multus reported status and answered after kubelet's swap,
// OnDefineDomain, the interface cache read by KubeVirt's reader, then the stop.
func drive(t *testing.T, p *pod, start func() *sidecar) answers {
	t.Helper()
	pod, vmi := harness.LoadSamples(t)
	// The pod starts with the annotations set before Multus reports status; virt-controller writes
	// kubevirt.io/network-info only once every container is Ready, so device-info starts empty
	// (pkg/virt-controller/watch/vmi/lifecycle.go).
	require.NoError(t, p.WritePodInfo(pod.Metadata.Labels, harness.Without(pod.Metadata.Annotations,
		"k8s.v1.cni.cncf.io/network-status", "k8s.ovn.org/pod-networks", "kubevirt.io/network-info")))
	require.NoError(t, p.WriteDeviceInfo(""))
	sc := start()
	var a answers

	info, err := bench.CallInfo(p.Socket())
	require.NoError(t, err)
	a.Info = infoAnswer{Name: info.Name, Versions: info.Versions, HookPoints: map[string]int32{}}
	for _, hp := range info.HookPoints {
		a.Info.HookPoints[hp.Name] = hp.Priority
	}

	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	type result struct {
		data *cloudinit.CloudInitData
		err  error
	}
	done := make(chan result, 1)
	go func() {
		out, err := mgr.PreCloudInitIso(vmi, harness.SampleNoCloud())
		done <- result{out, err}
	}()
	_, err = sc.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "waiting for data" }, 20*time.Second)
	require.NoError(t, err, "PreCloudInitIso waits for the network status")
	require.NoError(t, p.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations)) // kubelet's swap: Multus reported
	select {
	case r := <-done:
		require.NoError(t, r.err)
		a.CloudInit = r.data
	case <-time.After(30 * time.Second):
		t.Fatal("PreCloudInitIso did not return after kubelet's swap")
	}

	spec := &api.DomainSpec{Type: "kvm", Name: "tenant-a_vm-sriov", Devices: api.Devices{
		Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: "02:00:00:00:00:01"}}},
	}}
	a.DomainXML, err = mgr.OnDefineDomain(spec, vmi)
	require.NoError(t, err)

	// The cache is written off the hooks' path, once the data is complete: wait for the sidecar to say so.
	_, err = sc.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "interface cache updated" }, 20*time.Second)
	require.NoError(t, err)
	a.IfaceCache = map[string]*kvcache.PodIfaceCacheData{}
	for _, iface := range boundIfaces {
		got, err := kvcache.ReadPodInterfaceCache(harness.CacheReader{Dir: p.CacheDir}, string(vmi.UID), iface)
		require.NoError(t, err, "KubeVirt's reader reads %s", iface)
		a.IfaceCache[iface] = got
	}

	require.FileExists(t, p.Socket())
	a.ExitCode = sc.stop(t)
	assert.NoFileExists(t, p.Socket(), "stopping removes the socket")
	return a
}

func TestContainer_DrivenByKubeVirtsHookManager_AnswersAsTheBareBinary(t *testing.T) {
	requireEngine(t)
	harness.LockHooksRoot(t)

	barePod := newPod(t, "bare")
	bare := drive(t, barePod, func() *sidecar { return startBare(t, barePod) })

	ctrPod := newPod(t, "ctr")
	var ctr *sidecar
	inContainer := drive(t, ctrPod, func() *sidecar {
		ctr = startContainer(t, ctrPod, nil, nil)
		return ctr
	})

	// The container answers exactly as the binary does on the same inputs.
	assert.Equal(t, bare, inContainer)

	// And those answers are the real ones, not two empty ones.
	assert.Equal(t, 0, inContainer.ExitCode, "podman stop: SIGTERM, graceful exit")
	assert.Contains(t, inContainer.Info.Versions, "v1alpha3")
	require.NotNil(t, inContainer.CloudInit)
	for _, want := range []string{"02:00:00:aa:01:01", "192.168.50.7/24", "fd50:0:0:1::7/64"} {
		assert.Contains(t, inContainer.CloudInit.NetworkData, want)
	}
	var dom api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(inContainer.DomainXML), &dom))
	assert.Len(t, dom.Devices.HostDevices, len(boundIfaces), "one hostdev per bound VF")
	assert.Equal(t, []string{"192.168.50.7", "fd50:0:0:1::7"}, inContainer.IfaceCache["sriov-l2"].PodIPs)

	// It ran as 107 in the volume KubeVirt mounts, with the binding name KubeVirt passed.
	_, vmi := harness.LoadSamples(t)
	st, err := os.Stat(filepath.Join(ctrPod.CacheDir, string(vmi.UID), "sriov-l2"))
	require.NoError(t, err)
	assert.Equal(t, uint32(107), st.Sys().(*syscall.Stat_t).Uid, "the cache file is written by uid 107")
	started := logLine(t, ctr.proc.Logs(), "started")
	assert.Equal(t, testVersion, started["version"])
	assert.Equal(t, bindingName, started["binding"])
	assert.Equal(t, bindingNameEnv, started["bindingSource"])
	assert.Equal(t, filepath.Join(mountHooks, harness.SocketName), started["socket"])
}

// logLine returns the first JSON log line whose msg is msg.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	require.Failf(t, "no such log line", "msg %q in:\n%s", msg, logs)
	return nil
}
