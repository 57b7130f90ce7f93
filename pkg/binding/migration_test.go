package binding

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// asMigrationTarget returns the sample VMI as virt-launcher's prepareMigrationTarget passes it to
// OnDefineDomain: with the migration state virt-controller set at the hand-off to the target pod.
func asMigrationTarget(t *testing.T, vmiJSON []byte, annotations map[string]string) []byte {
	t.Helper()
	var vmi map[string]any
	require.NoError(t, json.Unmarshal(vmiJSON, &vmi))
	vmi["status"] = map[string]any{"migrationState": map[string]any{
		"sourceNode": "node-a", "targetNode": "node-b", "targetPod": "virt-launcher-vm-tgt", "migrationUid": "mig-1",
	}}
	if annotations != nil {
		meta := vmi["metadata"].(map[string]any)
		meta["annotations"] = annotations
	}
	out, err := json.Marshal(vmi)
	require.NoError(t, err)
	return out
}

func TestBinding_OnDefineDomain_MigrationTarget_RefusedAtOnceWithReason(t *testing.T) {
	annotations, vmi := loadSample(t)
	domainXML := []byte("<domain><devices></devices></domain>")
	tests := []struct {
		name        string
		annotations map[string]string // pod annotations (device-info)
		vmi         []byte
		wantCode    codes.Code
	}{
		{"target, device-info present", annotations, asMigrationTarget(t, vmi, nil), codes.FailedPrecondition},
		// The target's device-info may be late: the refusal must not wait for it.
		{"target, device-info missing", withoutDeviceInfo(annotations), asMigrationTarget(t, vmi, nil), codes.FailedPrecondition},
		{"target with the re-plug opt-in", annotations, asMigrationTarget(t, vmi, map[string]string{replugAnnotation: replugValue}), codes.OK},
		{"first start", annotations, vmi, codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBinding(t, tc.annotations, nil)
			start := time.Now()
			out, err := b.OnDefineDomain(context.Background(), tc.vmi, domainXML)
			assert.Equal(t, tc.wantCode, status.Code(err), "%v", err)
			if tc.wantCode != codes.OK {
				assert.Less(t, time.Since(start), 100*time.Millisecond, "refused before any wait")
				assert.Contains(t, err.Error(), "OnDefineDomain: live migration refused")
				assert.Contains(t, err.Error(), "sriov-l2")
				assert.Nil(t, out)
				return
			}
			assert.Contains(t, string(out), "<hostdev", "the VF is wired as on any start")
		})
	}
}

const testBindingName = "sriov-udn"

func vmiWith(ms *model.MigrationState, annotations map[string]string, ifaces ...model.Interface) *model.VirtualMachineInstance {
	vmi := &model.VirtualMachineInstance{ObjectMeta: model.ObjectMeta{Name: "vm1", Namespace: "ns1", Annotations: annotations}}
	vmi.Spec.Domain.Devices.Interfaces = ifaces
	vmi.Status.MigrationState = ms
	return vmi
}

func bound(name string) model.Interface {
	return model.Interface{Name: name, Binding: &model.PluginBinding{Name: testBindingName}}
}

func TestCheckMigrationTarget(t *testing.T) {
	target := &model.MigrationState{TargetPod: "virt-launcher-vm1-tgt", TargetNode: "n2", SourceNode: "n1", MigrationUID: "m-1"}
	core := model.Interface{Name: "core"} // KubeVirt's own SR-IOV: KubeVirt re-plugs it itself
	other := model.Interface{Name: "other", Binding: &model.PluginBinding{Name: "passt"}}
	unplugged := bound("gone")
	unplugged.State = model.InterfaceStateAbsent
	replug := map[string]string{replugAnnotation: replugValue}
	tests := []struct {
		name       string
		vmi        *model.VirtualMachineInstance
		wantRefuse bool
		wantInMsg  []string
	}{
		{name: "first start: no migration state", vmi: vmiWith(nil, nil, bound("udn"))},
		{name: "migration state of a completed migration", vmi: vmiWith(&model.MigrationState{TargetPod: "p", Completed: true}, nil, bound("udn"))},
		{name: "migration state of a failed migration", vmi: vmiWith(&model.MigrationState{TargetPod: "p", Failed: true}, nil, bound("udn"))},
		{name: "not yet handed to a target pod", vmi: vmiWith(&model.MigrationState{SourceNode: "n1"}, nil, bound("udn"))},
		{name: "target, nothing bound to us", vmi: vmiWith(target, nil, core, other)},
		{name: "target, our interface hot-unplugged", vmi: vmiWith(target, nil, core, unplugged)},
		{name: "target with the re-plug opt-in", vmi: vmiWith(target, replug, bound("udn"))},
		{
			name: "target, bound interfaces", vmi: vmiWith(target, nil, core, bound("udn"), bound("udn2")), wantRefuse: true,
			wantInMsg: []string{"ns1/vm1", `"m-1"`, `"virt-launcher-vm1-tgt"`, "udn,udn2", `"sriov-udn"`, `node "n1"`, "keeps running"},
		},
		{
			name: "target, opt-in annotation with another value", vmi: vmiWith(target, map[string]string{replugAnnotation: "yes-please"}, bound("udn")), wantRefuse: true,
			wantInMsg: []string{replugAnnotation, `"replug"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkMigrationTarget(tt.vmi, testBindingName)
			if !tt.wantRefuse {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errMigrationRefused)
			for _, s := range tt.wantInMsg {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), "yes-please", "annotation values are never echoed")
		})
	}
}

func TestCheckMigrationTarget_NilVMI(t *testing.T) {
	assert.NoError(t, checkMigrationTarget(nil, testBindingName))
}

func TestDecodeVMI_ReadsMigrationStateAsKubeVirtMarshalsIt(t *testing.T) {
	// Field names of kubevirt.io/api core/v1 VirtualMachineInstanceMigrationState; test/integration
	// proves it with the KubeVirt type itself.
	vmi, err := model.DecodeVMI([]byte(`{"metadata":{"name":"vm1"},"spec":{"domain":{"devices":{}}},
	  "status":{"migrationState":{"targetNode":"n2","targetPod":"tgt","sourceNode":"n1","migrationUid":"m-1","completed":false}}}`))
	require.NoError(t, err)
	require.NotNil(t, vmi.Status.MigrationState)
	assert.Equal(t, model.MigrationState{TargetNode: "n2", TargetPod: "tgt", SourceNode: "n1", MigrationUID: "m-1"}, *vmi.Status.MigrationState)
	assert.True(t, vmi.InMigrationTarget())
}
