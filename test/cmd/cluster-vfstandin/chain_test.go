package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/network/downwardapi"
	"kubevirt.io/kubevirt/pkg/network/namescheme"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// sidecarBin is our sidecar, built once for the package by TestMain (make build).
var sidecarBin string

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, &sidecarBin))
}

// buildStandIn compiles this package into a directory of the test's.
func buildStandIn(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vf-standin")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build the stand-in: %s", out)
	return bin
}

// samplePod is our sidecar's pod (hook-sidecar-vfstandin-0) with the samples' pod-info and device-info volumes,
// as the pod's DownwardAPI volumes hold them once Multus and virt-controller wrote their annotations.
func samplePod(t *testing.T) *harness.Pod {
	t.Helper()
	pod, _ := harness.LoadSamples(t)
	p := harness.TestPod(t, "vfstandin-0")
	require.NoError(t, p.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
	require.NoError(t, p.WriteDeviceInfo(pod.Metadata.Annotations[downwardapi.NetworkInfoAnnot]))
	return p
}

// launcherDomain is the domain virt-launcher hands the first OnDefineDomain callback for the samples' VMI:
// its pod NIC, no hostdev yet (the binding adds them).
func launcherDomain() *api.DomainSpec {
	return &api.DomainSpec{
		Type: "qemu",
		Name: "tenant-a_vm-sriov",
		Devices: api.Devices{
			Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: "02:00:00:00:00:0a"}}},
		},
	}
}

// KubeVirt's own hook Manager calls our sidecar, then the stand-in, as virt-launcher does when both are
// binding plugins of the VMI in that order: the stand-in accepts the hostdevs ours wrote and replaces each with
// an emulated NIC on the CNI stand-in's TAP.
func TestHookManager_OursThenTheStandIn_HostdevsBecomeEmulatedNICs(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	standIn := buildStandIn(t)
	_, vmi := harness.LoadSamples(t)
	ours := samplePod(t)
	ours.Start(t, sidecarBin, "--wait-timeout", "5s")
	standInDir := harness.SidecarDir(t, "vfstandin-1")
	harness.Start(t, standIn, "--socket-dir", standInDir, "--device-info-file", ours.DeviceInfoFile(), "--after-socket=")

	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(2, 10*time.Second))
	out, err := mgr.OnDefineDomain(launcherDomain(), vmi)
	require.NoError(t, err)

	var dom libvirtxml.Domain
	require.NoError(t, dom.Unmarshal(out))
	assert.Empty(t, dom.Devices.Hostdevs, "the stand-in replaced every hostdev ours wrote")
	byAlias := map[string]libvirtxml.DomainInterface{}
	for _, nic := range dom.Devices.Interfaces {
		require.NotNil(t, nic.Alias)
		byAlias[nic.Alias.Name] = nic
	}
	assert.Contains(t, byAlias, "ua-default", "the pod NIC is left as virt-launcher made it")
	for _, tc := range []struct{ iface, mac, guest string }{
		{"sriov-l2", "02:00:00:aa:01:01", "0000:07:00.0"},
		{"sriov-localnet", "02:00:00:aa:02:01", ""},
	} {
		nic, ok := byAlias[nicAliasPrefix+tc.iface]
		require.True(t, ok, "no emulated NIC for %s in:\n%s", tc.iface, out)
		_, own := byAlias["ua-"+tc.iface]
		assert.False(t, own, "%s: an <interface> carries the interface's own alias; on a node the VF is a <hostdev>", tc.iface)
		assert.Equal(t, TapName(namescheme.GenerateHashedInterfaceName(tc.iface)), nic.Target.Dev, tc.iface)
		assert.Equal(t, tc.mac, nic.MAC.Address, tc.iface)
		if tc.guest != "" {
			require.NotNil(t, nic.Address, tc.iface)
			assert.Equal(t, tc.guest, pciString(nic.Address.PCI), "%s: ours put the VMI's pciAddress on the hostdev, the NIC keeps it", tc.iface)
		}
	}

	// virt-launcher defines the domain again from what it read back: ours finds no <interface> of the VF's own
	// alias, wires the VF again, and the stand-in takes that hostdev out, leaving the NIC of the first define.
	var readBack api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(out), &readBack))
	again, err := mgr.OnDefineDomain(&readBack, vmi)
	require.NoError(t, err)
	var dom2 libvirtxml.Domain
	require.NoError(t, dom2.Unmarshal(string(again)))
	assert.Empty(t, dom2.Devices.Hostdevs)
	assert.Len(t, dom2.Devices.Interfaces, len(dom.Devices.Interfaces), "one NIC per VF, as after the first define")
}

// Without our sidecar before it, the stand-in refuses: the VM would fail to start naming the missing hostdev.
func TestHookManager_StandInAlone_RefusesNamingTheAbsentHostdev(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	standIn := buildStandIn(t)
	_, vmi := harness.LoadSamples(t)
	dir := harness.SidecarDir(t, "vfstandin-alone")
	p := harness.Start(t, standIn, "--socket-dir", dir, "--device-info-file", samplePod(t).DeviceInfoFile(), "--after-socket=")

	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	_, err := mgr.OnDefineDomain(launcherDomain(), vmi)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"ua-sriov-sriov-l2" for interface "sriov-l2": absent from the domain`)
	line, err := p.WaitLog(func(m map[string]any) bool { return m["msg"] == "OnDefineDomain refused" }, 5*time.Second)
	require.NoError(t, err)
	assert.True(t, strings.Contains(line["error"].(string), "absent from the domain"), "%v", line)
}

// The stand-in started first and the Manager collecting while our sidecar is not yet up (as in a pod whose
// containers start in any order; ours is hook-sidecar-0, the directory read first): the stand-in listens only
// once ours has, so the Manager still calls ours first and the swap succeeds. Without the wait the Manager finds
// the stand-in alone in its first pass and calls it first, on every define.
func TestHookManager_StandInStartedFirst_ListensAfterOurs_OrderHolds(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	standIn := buildStandIn(t)
	_, vmi := harness.LoadSamples(t)
	ours := samplePod(t)
	// A socket name of this test's own: other packages' tests listen on the default one in this network namespace.
	ours.SocketName = fmt.Sprintf("ours-%d.sock", os.Getpid())
	standInDir := harness.SidecarDir(t, "vfstandin-1")
	sp := exec.Command(standIn, "--socket-dir", standInDir, "--device-info-file", ours.DeviceInfoFile(), "--after-socket", ours.SocketName)
	standInLog := &harness.LockedBuffer{}
	sp.Stderr = standInLog
	require.NoError(t, sp.Start())
	t.Cleanup(func() { _ = sp.Process.Kill(); _ = sp.Wait() })
	// The Manager's first pass runs once the stand-in is up (waiting, or listening without the wait) and before
	// ours is: without the wait it would find the stand-in alone.
	require.NoError(t, waitContains(standInLog, []string{`"msg":"waiting for the binding's sidecar to listen"`, `"msg":"started"`}, 20*time.Second))

	mgr := hooks.GetManager()
	collected := make(chan error, 1)
	go func() { collected <- mgr.Collect(2, 30*time.Second) }()
	ours.Start(t, sidecarBin, "--wait-timeout", "5s")
	require.NoError(t, <-collected, "stand-in's log:\n%s", standInLog)
	out, err := mgr.OnDefineDomain(launcherDomain(), vmi)
	require.NoError(t, err, "the Manager called the stand-in before ours; stand-in's log:\n%s", standInLog)
	var dom libvirtxml.Domain
	require.NoError(t, dom.Unmarshal(out))
	assert.Empty(t, dom.Devices.Hostdevs, "the stand-in replaced every hostdev ours wrote")
	assert.Contains(t, standInLog.String(), "the binding's sidecar listens")
}

// waitContains polls b until it holds one of subs, or timeout.
func waitContains(b *harness.LockedBuffer, subs []string, timeout time.Duration) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		for _, s := range subs {
			if strings.Contains(b.String(), s) {
				return nil
			}
		}
		select {
		case <-deadline:
			return fmt.Errorf("none of %q within %s in:\n%s", subs, timeout, b)
		case <-tick.C:
		}
	}
}
