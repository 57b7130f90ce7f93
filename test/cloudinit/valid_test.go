package cloudinit

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"
	kvcloudinit "kubevirt.io/kubevirt/pkg/cloud-init"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
)

// The sidecar's PreCloudInitIso answer carries CloudInitData alone (pkg/hooks callbacks.go). KubeVirt's hook
// Manager takes it only when IsValidCloudInitData accepts it (pkg/hooks/manager.go
// preCloudInitIsoValidateResult); otherwise it decodes the answer's CloudInitNoCloudSource, which is empty,
// and the VM does not start. So every answer, bound or not, with or without the user's UserData, NoCloud or
// ConfigDrive, must be valid by KubeVirt's own check.
func TestPreCloudInitIso_EveryAnswerIsValidCloudInitData(t *testing.T) {
	pod, sample := harness.LoadSamples(t)
	snap := downwardapi.SnapshotFromMaps(pod.Metadata.Labels, pod.Metadata.Annotations)
	opts := model.Options{BindingName: "sriov-udn"}

	// Volumes as a user writes them; an empty UserData is KubeVirt's when only networkData is given.
	volumes := []struct {
		name   string
		source kvv1.VolumeSource
	}{
		{"noCloud-userData", kvv1.VolumeSource{CloudInitNoCloud: &kvv1.CloudInitNoCloudSource{UserData: "#cloud-config\nuser: fedora\n"}}},
		{"noCloud-networkData-only", kvv1.VolumeSource{CloudInitNoCloud: &kvv1.CloudInitNoCloudSource{
			NetworkData: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"}}},
		{"configDrive-userData", kvv1.VolumeSource{CloudInitConfigDrive: &kvv1.CloudInitConfigDriveSource{UserData: "#!/bin/sh\necho hi\n"}}},
		{"configDrive-networkData-only", kvv1.VolumeSource{CloudInitConfigDrive: &kvv1.CloudInitConfigDriveSource{
			NetworkData: `{"links":[],"networks":[],"services":[]}`}}},
	}
	vmis := []struct {
		name string
		vmi  func() *kvv1.VirtualMachineInstance
	}{
		{"bound", func() *kvv1.VirtualMachineInstance { return sample.DeepCopy() }},
		// With the cloudbase-init script (ConfigDrive only; NoCloud ignores the annotation).
		{"bound-windows-script", func() *kvv1.VirtualMachineInstance {
			vmi := sample.DeepCopy()
			if vmi.Annotations == nil {
				vmi.Annotations = map[string]string{}
			}
			vmi.Annotations[cloudinit.WindowsNetworkScriptAnnotation] = "true"
			return vmi
		}},
		// Nothing bound: the pass-through (cloudinit.Input.PassThrough).
		{"nothing-bound", func() *kvv1.VirtualMachineInstance {
			vmi := sample.DeepCopy()
			for i := range vmi.Spec.Domain.Devices.Interfaces {
				vmi.Spec.Domain.Devices.Interfaces[i].Binding = nil
			}
			return vmi
		}},
	}
	for _, v := range vmis {
		for _, vol := range volumes {
			t.Run(v.name+"/"+vol.name, func(t *testing.T) {
				vmi := v.vmi()
				vmi.Spec.Volumes = []kvv1.Volume{{Name: "cloudinitdisk", VolumeSource: vol.source}}
				// What virt-launcher sends (manager.go preCloudInitIsoDataToJSON: json.Marshal of its CloudInitData).
				in, err := kvcloudinit.ReadCloudInitVolumeDataSource(vmi, "")
				require.NoError(t, err)
				require.NotNil(t, in)
				raw, err := json.Marshal(in)
				require.NoError(t, err)

				call := pipeline.NewCall(kubevirtjson.VMI(t, vmi), opts)
				require.Equal(t, v.name != "nothing-bound", call.Bound())
				wait := func(context.Context, string, pipeline.Need) (*downwardapi.Snapshot, error) { return snap, nil }
				answer, _, err := call.PreCloudInitIso(context.Background(), raw, wait)
				require.NoError(t, err)

				// What the hook Manager makes of the answer (preCloudInitIsoValidateResult).
				var out *kvcloudinit.CloudInitData
				require.NoError(t, json.Unmarshal(answer, &out))
				assert.True(t, kvcloudinit.IsValidCloudInitData(out), "KubeVirt would fall back to the legacy "+
					"CloudInitNoCloudSource, which the sidecar does not send: %s", answer)
				// The metadata as sent, through the same JSON round trip (empty maps come back nil).
				var sent *kvcloudinit.CloudInitData
				require.NoError(t, json.Unmarshal(raw, &sent))
				assert.Equal(t, sent.DataSource, out.DataSource)
				assert.Equal(t, sent.NoCloudMetaData, out.NoCloudMetaData, "KubeVirt's metadata passes through")
				assert.Equal(t, sent.ConfigDriveMetaData, out.ConfigDriveMetaData, "KubeVirt's metadata passes through")
			})
		}
	}
}
