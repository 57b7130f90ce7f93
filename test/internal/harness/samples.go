package harness

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "kubevirt.io/api/core/v1"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	kvcache "kubevirt.io/kubevirt/pkg/network/cache"
	kfs "kubevirt.io/kubevirt/pkg/os/fs"
)

// SamplePod is the metadata of cmd/sidecar/samples/pod.json, the virt-launcher pod `make demo` renders: a
// dual-stack layer2 secondary UDN over an SR-IOV VF and a localnet with ipam_mode dhcp.
type SamplePod struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// LoadSamples reads the sample pod and its VMI (cmd/sidecar/samples/vmi.json: two interfaces bound to
// sriov-udn).
func LoadSamples(t testing.TB) (SamplePod, *v1.VirtualMachineInstance) {
	t.Helper()
	dir := filepath.Join(RepoRoot(), "cmd", "sidecar", "samples")
	var pod SamplePod
	raw, err := os.ReadFile(filepath.Join(dir, "pod.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &pod))
	raw, err = os.ReadFile(filepath.Join(dir, "vmi.json"))
	require.NoError(t, err)
	var vmi v1.VirtualMachineInstance
	require.NoError(t, json.Unmarshal(raw, &vmi))
	return pod, &vmi
}

// Without returns a copy of m without the keys drop (annotations a pod has before Multus reports, say).
func Without(m map[string]string, drop ...string) map[string]string {
	out := maps.Clone(m)
	for _, k := range drop {
		delete(out, k)
	}
	return out
}

// CacheReader roots KubeVirt's pod interface cache reader (kvcache.ReadPodInterfaceCache) at Dir, keeping its
// <vmi-uid>/<iface> layout: what a virt-handler integration hands KubeVirt's reader to read our files.
type CacheReader struct{ Dir string }

// New is kvcache.CacheCreator's.
func (c CacheReader) New(path string) *kvcache.Cache {
	const kubevirtRoot = "/var/run/kubevirt-private/network-info-cache"
	if rest, ok := strings.CutPrefix(path, kubevirtRoot+"/"); ok {
		return kvcache.NewCustomCache(filepath.Join(c.Dir, rest), kfs.New())
	}
	return kvcache.NewCustomCache(filepath.Join(c.Dir, "elsewhere", path), kfs.New())
}

// SampleNoCloud is the NoCloud data virt-launcher reads from the sample VMI's cloud-init volume.
func SampleNoCloud() *cloudinit.CloudInitData {
	return &cloudinit.CloudInitData{
		DataSource:      cloudinit.DataSourceNoCloud,
		NoCloudMetaData: &cloudinit.NoCloudMetadata{InstanceID: "vm-sriov.tenant-a", LocalHostname: "vm-sriov"},
		UserData:        "#cloud-config\nuser: fedora\n",
		VolumeName:      "cloudinitdisk",
	}
}
