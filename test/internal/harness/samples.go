package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "kubevirt.io/api/core/v1"
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
