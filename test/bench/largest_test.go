package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvcloudinit "kubevirt.io/kubevirt/pkg/cloud-init"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
)

func TestLargestInputs_AreAtTheLimitsOfTheSidecarsCloudinit(t *testing.T) {
	assert.Equal(t, cloudinit.MaxNetworkDataBytes, LargestUserData)
	assert.Equal(t, cloudinit.MaxNestingDepth, limitDepth)
	assert.Equal(t, cloudinit.MaxNodes, limitNodes)
	assert.Equal(t, cloudinit.MaxYAMLAliases, limitAliases)

	ifaces := Ifaces(LargestNICs, BaseNAD)
	ann, err := Annotations(ifaces, LargestAnnotations)
	require.NoError(t, err)
	snap := downwardapi.SnapshotFromMaps(nil, ann)
	require.Empty(t, snap.Problems)
	vmi := kubevirtjson.VMI(t, VMI(ifaces))
	bound, err := model.Build(vmi, snap, model.Options{BindingName: BindingName})
	require.NoError(t, err)
	require.Len(t, bound, LargestNICs)

	for _, in := range LargestInputs() {
		assert.LessOrEqual(t, len(in.NetworkData), LargestUserData, in.Name)
		assert.Greater(t, len(in.NetworkData), LargestUserData-32<<10, "%s: about 1 MiB", in.Name)
		var err error
		if in.DataSource == kvcloudinit.DataSourceConfigDrive {
			_, err = cloudinit.MergeNetworkDataJSON([]byte(in.NetworkData), bound)
		} else {
			_, err = cloudinit.MergeNoCloud([]byte(in.NetworkData), bound)
		}
		if in.Legal {
			assert.NoError(t, err, in.Name)
		} else {
			assert.Error(t, err, in.Name)
		}
	}

	for _, in := range append(LargestSecretInputs(), LargestRequest()) {
		assert.LessOrEqual(t, len(in.UserData), SecretUserDataBytes, in.Name)
		assert.Greater(t, len(in.UserData), SecretUserDataBytes-1024, "%s: a full Secret", in.Name)
		assert.LessOrEqual(t, len(in.NetworkData), LargestUserData, in.Name)
		if in.NetworkData != "" {
			_, err := cloudinit.MergeNoCloud([]byte(in.NetworkData), bound)
			assert.NoError(t, err, in.Name)
		}
	}

	vmiJSON, err := json.Marshal(VMI(ifaces))
	require.NoError(t, err)
	dom, err := LargestDomain(vmiJSON)
	require.NoError(t, err)
	assert.Less(t, len(dom)+len(vmiJSON), grpcMessageLimit, "fits one gRPC message")
	assert.Greater(t, len(dom), grpcMessageLimit-64<<10)
}
