package integration

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "kubevirt.io/api/core/v1"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// startSidecar starts the built binary as hook-sidecar-<suffix> would run in a virt-launcher pod.
func startSidecar(t *testing.T, suffix, socketName string, extra ...string) (*harness.Process, string) {
	t.Helper()
	p := harness.TestPod(t, suffix)
	p.SocketName = socketName
	return p.Start(t, sidecarBin, append([]string{"--wait-timeout", "5s"}, extra...)...), p.Socket()
}

func plainVMI() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: k8smeta.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: types.UID("3f1f5a0e-0000-4000-8000-000000000001")},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
				{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
			}}},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
		},
	}
}

func domainSpec() *api.DomainSpec {
	return &api.DomainSpec{
		Type: "kvm",
		Name: "ns1_vm1",
		Devices: api.Devices{
			Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: "02:00:00:00:00:01"}}},
		},
	}
}

func noCloudData() *cloudinit.CloudInitData {
	return &cloudinit.CloudInitData{
		DataSource:      cloudinit.DataSourceNoCloud,
		NoCloudMetaData: &cloudinit.NoCloudMetadata{InstanceID: "vm1.ns1", LocalHostname: "vm1"},
		UserData:        "#cloud-config\npassword: x\n",
		NetworkData:     "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
		VolumeName:      "cloudinitdisk",
	}
}

func configDriveData() *cloudinit.CloudInitData {
	return &cloudinit.CloudInitData{
		DataSource:          cloudinit.DataSourceConfigDrive,
		ConfigDriveMetaData: &cloudinit.ConfigDriveMetadata{InstanceID: "vm1.ns1", Hostname: "vm1", UUID: "3f1f5a0e"},
		UserData:            "#cloud-config\n",
		NetworkData:         `{"links":[],"networks":[],"services":[]}`,
		VolumeName:          "configdrive",
	}
}

func TestHookManager_CollectsSidecarAndCallsEveryHookPoint(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	proc, socket := startSidecar(t, "itest-0", "sriov-udn-binding.sock")

	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))

	vmi := plainVMI()
	spec := domainSpec()
	want, err := xml.MarshalIndent(spec, "", "\t")
	require.NoError(t, err)
	got, err := mgr.OnDefineDomain(spec, vmi)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "a VMI with none of our interfaces passes through unchanged")

	for name, in := range map[string]*cloudinit.CloudInitData{"noCloud": noCloudData(), "configDrive": configDriveData()} {
		t.Run(name, func(t *testing.T) {
			wantData := *in
			out, err := mgr.PreCloudInitIso(vmi, in)
			require.NoError(t, err)
			require.NotNil(t, out)
			assert.Equal(t, wantData, *out, "metadata, VolumeName and data kept")
		})
	}

	require.NoError(t, mgr.Shutdown())
	code, err := proc.Wait(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, socket)
	assert.Contains(t, proc.Logs(), `"hook":"PreCloudInitIso"`)
	assert.Contains(t, proc.Logs(), `"outcome":"ok"`)
}

func TestHookManager_CollectsTwoInstancesWithDistinctSocketNames(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	procA, sockA := startSidecar(t, "itest-a", "sriov-udn-binding-a.sock")
	procB, sockB := startSidecar(t, "itest-b", "sriov-udn-binding-b.sock")

	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(2, 10*time.Second))
	spec := domainSpec()
	want, err := xml.MarshalIndent(spec, "", "\t")
	require.NoError(t, err)
	got, err := mgr.OnDefineDomain(spec, plainVMI())
	require.NoError(t, err)
	assert.Equal(t, string(want), got)
	for _, p := range []*harness.Process{procA, procB} {
		_, err := p.WaitLog(func(l map[string]any) bool { return l["hook"] == "OnDefineDomain" }, 5*time.Second)
		assert.NoError(t, err, "both sidecars receive OnDefineDomain (results chain)")
	}

	require.NoError(t, mgr.Shutdown())
	for i, p := range []*harness.Process{procA, procB} {
		code, err := p.Wait(10 * time.Second)
		require.NoError(t, err)
		assert.Equal(t, 0, code, "instance %d", i)
	}
	assert.NoFileExists(t, sockA)
	assert.NoFileExists(t, sockB)
}

func TestSidecar_SIGTERMStopsGracefullyAndRemovesSocket(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	proc, socket := startSidecar(t, "itest-term", "sriov-udn-binding.sock")
	require.FileExists(t, socket)
	require.NoError(t, proc.Signal(syscall.SIGTERM))
	code, err := proc.Wait(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.NoFileExists(t, socket)
}

func TestSidecar_StaleSocketAtStartIsReplaced(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	dir := harness.SidecarDir(t, "itest-stale")
	stale := filepath.Join(dir, "sriov-udn-binding.sock")
	require.NoError(t, os.WriteFile(stale, []byte("left by a crash"), 0o600))
	proc := harness.Start(t, sidecarBin, "--socket-dir", dir, "--iface-cache-dir", filepath.Join(dir, "ifacecache"))
	st, err := os.Stat(stale)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, st.Mode().Type())
	require.NoError(t, hooks.GetManager().Collect(1, 10*time.Second))
	require.NoError(t, hooks.GetManager().Shutdown())
	code, err := proc.Wait(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
}

func TestSidecar_MissingSocketDirExitsNonZeroWithClearError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	out, err := runBinary(t, "--socket-dir", dir)
	require.Error(t, err)
	// The fatal line is JSON (logging began before the socket): the path's quotes are escaped.
	assert.Contains(t, out, fmt.Sprintf(`socket directory \"%s\"`, dir))
}
