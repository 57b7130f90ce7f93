package integration

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
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

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// podLayout is one sidecar on its pod.
type podLayout struct {
	*harness.Pod
	proc *harness.Process
}

func startBoundSidecar(t *testing.T, suffix string, extra ...string) *podLayout {
	t.Helper()
	l := &podLayout{Pod: harness.TestPod(t, suffix)}
	// virt-controller writes kubevirt.io/network-info only once every container is Ready, so the
	// device-info file starts empty (pkg/virt-controller/watch/vmi/lifecycle.go).
	require.NoError(t, l.WriteDeviceInfo(""))
	l.proc = l.Start(t, sidecarBin, append([]string{"--log-level", "debug"}, extra...)...)
	return l
}

func fmtAny(v any) string { return fmt.Sprint(v) }

func TestPreCloudInitIso_WaitsForNetworkStatus_ReturnsWithinMillisecondsOfSwap(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-late")
	// The pod starts with only the annotations KubeVirt/OVN-K set before Multus reports status.
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, harness.Without(pod.Metadata.Annotations,
		"k8s.v1.cni.cncf.io/network-status", "kubevirt.io/network-info", "k8s.ovn.org/pod-networks")))

	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))

	type result struct {
		data *cloudinit.CloudInitData
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		out, err := mgr.PreCloudInitIso(vmi, harness.SampleNoCloud())
		done <- result{out, err, time.Now()}
	}()
	waiting, err := l.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "waiting for data" }, 10*time.Second)
	require.NoError(t, err)
	assert.Contains(t, fmtAny(waiting["missing"]), "interface sriov-l2 (network sriov-l2)")
	assert.Contains(t, fmtAny(waiting["missing"]), "tenant-a/l2-secondary")

	time.Sleep(2 * time.Second) // the scenario: Multus status lands 2 s after the hook was called
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
	swapped := time.Now()

	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("PreCloudInitIso did not return after the swap")
	}
	require.NoError(t, res.err)
	latency := res.at.Sub(swapped)
	t.Logf("hook returned %s after AtomicWriter.Write returned (negative: before Write finished; kubelet renames ..data mid-Write)", latency)
	assert.Less(t, latency, 50*time.Millisecond, "the watcher, not a poll, must wake the hook")

	out := res.data
	require.NotNil(t, out)
	assert.Equal(t, "cloudinitdisk", out.VolumeName)
	require.NotNil(t, out.NoCloudMetaData)
	assert.Equal(t, "vm-sriov.tenant-a", out.NoCloudMetaData.InstanceID)
	// The user's cloud-config travels unchanged as the first part, ours (every boot applies the network
	// config) after it (pkg/cloudinit userdata.go).
	assert.Contains(t, out.UserData, "\n\n#cloud-config\nuser: fedora\n\n--")
	assert.Contains(t, out.UserData, "when: [boot-new-instance, boot]")
	for _, want := range []string{"02:00:00:aa:01:01", "192.168.50.7/24", "fd50:0:0:1::7/64", "02:00:00:aa:02:01", "dhcp"} {
		assert.Contains(t, out.NetworkData, want)
	}
}

func TestPreCloudInitIso_DataNeverArrives_ErrorNamesEveryMissingItem(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-timeout", "--wait-timeout", "1s")
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, harness.Without(pod.Metadata.Annotations,
		"k8s.v1.cni.cncf.io/network-status", "k8s.ovn.org/pod-networks", "kubevirt.io/network-info")))
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	_, err := mgr.PreCloudInitIso(vmi, harness.SampleNoCloud())
	require.Error(t, err)
	for _, want := range []string{"sriov-l2", "sriov-localnet", "k8s.v1.cni.cncf.io/network-status", "tenant-a/l2-secondary", "tenant-a/localnet-dhcp"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestOnDefineDomain_WaitsForDeviceInfo_AddsOneHostdevPerVFIdempotently(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-domain")
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, harness.Without(pod.Metadata.Annotations, "kubevirt.io/network-info")))
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))

	spec := &api.DomainSpec{Type: "kvm", Name: "tenant-a_vm-sriov", Devices: api.Devices{
		Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: "02:00:00:00:00:01"}}},
	}}
	type result struct {
		xml string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := mgr.OnDefineDomain(spec, vmi)
		done <- result{out, err}
	}()
	// network-status already carries device-info, so no wait is needed here: the call returns.
	res := <-done
	require.NoError(t, res.err)
	harness.RecordDomainSpec(t, "", spec, res.xml) // test/libvirt runs libvirt's checks on it

	var first api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(res.xml), &first))
	byAlias := map[string]api.HostDevice{}
	for _, hd := range first.Devices.HostDevices {
		require.NotNil(t, hd.Alias)
		assert.True(t, hd.Alias.IsUserDefined(), "alias carries KubeVirt's ua- prefix")
		byAlias[hd.Alias.GetName()] = hd // GetName strips the ua- prefix
	}
	require.Len(t, byAlias, 2, "one hostdev per bound VF")
	l2 := byAlias["sriov-sriov-l2"]
	require.NotNil(t, l2.Source.Address)
	assert.Equal(t, "0x65", l2.Source.Address.Bus)
	assert.Equal(t, "0x2", l2.Source.Address.Function)
	assert.Equal(t, "no", l2.Managed)
	require.NotNil(t, l2.Address, "guest pciAddress from the VMI spec")
	assert.Equal(t, "0x07", l2.Address.Bus)
	assert.Equal(t, "0x5", byAlias["sriov-sriov-localnet"].Source.Address.Function)
	assert.Len(t, first.Devices.Interfaces, 1, "the masquerade interface is untouched")

	// virt-launcher calls OnDefineDomain again with the domain it got back (hotplug ports).
	again, err := mgr.OnDefineDomain(&first, vmi)
	require.NoError(t, err)
	harness.RecordDomainSpec(t, "again", &first, again)
	var second api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(again), &second))
	assert.Equal(t, first.Devices.HostDevices, second.Devices.HostDevices)
	assert.Equal(t, strings.Count(res.xml, "<hostdev"), strings.Count(again, "<hostdev"))

	// The interface cache holds the addresses of the static interface for KubeVirt's reader; it is
	// written off the hook's path, so wait for the sidecar to say it was.
	_, err = l.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "interface cache updated" }, 10*time.Second)
	require.NoError(t, err)
	entry, err := os.ReadFile(filepath.Join(l.CacheDir, string(vmi.UID), "sriov-l2"))
	require.NoError(t, err)
	var cached struct {
		PodIP  string   `json:"podIP"`
		PodIPs []string `json:"podIPs"`
	}
	require.NoError(t, json.Unmarshal(entry, &cached))
	assert.Equal(t, "192.168.50.7", cached.PodIP)
	assert.Equal(t, []string{"192.168.50.7", "fd50:0:0:1::7"}, cached.PodIPs)
}

func TestSidecar_SIGTERMWhileHookWaits_CallFailsAndProcessExitsCleanly(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-term-wait")
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, harness.Without(pod.Metadata.Annotations, "k8s.v1.cni.cncf.io/network-status", "k8s.ovn.org/pod-networks")))
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := mgr.PreCloudInitIso(vmi, harness.SampleNoCloud())
		done <- err
	}()
	_, err := l.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "waiting for data" }, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.proc.Signal(syscall.SIGTERM))
	code, err := l.proc.Wait(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	callErr := <-done
	require.Error(t, callErr, "the waiting call is cancelled, not answered with partial data")
}

func TestInterfaceCache_FollowsIPChangeAfterStart_ReadByKubeVirtsReader(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-cache")
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	_, err := mgr.PreCloudInitIso(vmi, harness.SampleNoCloud())
	require.NoError(t, err)
	_, err = l.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "interface cache updated" }, 10*time.Second)
	require.NoError(t, err)

	creator := harness.CacheReader{Dir: l.CacheDir}
	got, err := kvcache.ReadPodInterfaceCache(creator, string(vmi.UID), "sriov-l2")
	require.NoError(t, err)
	assert.Equal(t, "192.168.50.7", got.PodIP)
	assert.Equal(t, []string{"192.168.50.7", "fd50:0:0:1::7"}, got.PodIPs)
	require.NotNil(t, got.Iface)
	assert.Equal(t, "02:00:00:aa:01:01", got.Iface.MacAddress)

	// OVN-K moves the address (e.g. a re-created IPAMClaim); kubelet projects the new annotation.
	changed := harness.Without(pod.Metadata.Annotations)
	changed["k8s.ovn.org/pod-networks"] = strings.ReplaceAll(changed["k8s.ovn.org/pod-networks"], "192.168.50.7/24", "192.168.50.9/24")
	changed["k8s.v1.cni.cncf.io/network-status"] = strings.ReplaceAll(changed["k8s.v1.cni.cncf.io/network-status"], `"192.168.50.7"`, `"192.168.50.9"`)
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, changed))
	_, err = l.proc.WaitLog(func(m map[string]any) bool { return m["msg"] == "interface cache updated" }, 10*time.Second)
	require.NoError(t, err, "no hook call is needed: the watcher drives the rewrite")
	got, err = kvcache.ReadPodInterfaceCache(creator, string(vmi.UID), "sriov-l2")
	require.NoError(t, err)
	assert.Equal(t, "192.168.50.9", got.PodIP)

	_, err = kvcache.ReadPodInterfaceCache(creator, string(vmi.UID), "sriov-localnet")
	require.NoError(t, err, "the DHCP interface's OVN-K address is cached too")
}
