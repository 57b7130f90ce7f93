package kubevirtjson

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// VMI converts a KubeVirt VMI as virt-launcher sends it to hooks (json.Marshal of the KubeVirt type).
func VMI(t testing.TB, vmi *kvv1.VirtualMachineInstance) *model.VirtualMachineInstance {
	t.Helper()
	out, err := ConvertVMI(vmi)
	require.NoError(t, err)
	return out
}

// ConvertVMI is VMI for callers without a testing.TB (benchmark programs).
func ConvertVMI(vmi *kvv1.VirtualMachineInstance) (*model.VirtualMachineInstance, error) {
	raw, err := json.Marshal(vmi)
	if err != nil {
		return nil, err
	}
	return model.DecodeVMI(raw)
}

// Interfaces converts KubeVirt interface specs.
func Interfaces(t testing.TB, in ...kvv1.Interface) []model.Interface {
	t.Helper()
	out := make([]model.Interface, len(in))
	for i, kv := range in {
		raw, err := json.Marshal(kv)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &out[i]))
	}
	return out
}
