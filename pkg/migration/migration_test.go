package migration_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/migration"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

const binding = "sriov-udn"

func vmiWith(ms *model.MigrationState, annotations map[string]string, ifaces ...model.Interface) *model.VirtualMachineInstance {
	vmi := &model.VirtualMachineInstance{ObjectMeta: model.ObjectMeta{Name: "vm1", Namespace: "ns1", Annotations: annotations}}
	vmi.Spec.Domain.Devices.Interfaces = ifaces
	vmi.Status.MigrationState = ms
	return vmi
}

func bound(name string) model.Interface {
	return model.Interface{Name: name, Binding: &model.PluginBinding{Name: binding}}
}

func TestCheckTarget(t *testing.T) {
	target := &model.MigrationState{TargetPod: "virt-launcher-vm1-tgt", TargetNode: "n2", SourceNode: "n1", MigrationUID: "m-1"}
	core := model.Interface{Name: "core"} // KubeVirt's own SR-IOV: KubeVirt re-plugs it itself
	other := model.Interface{Name: "other", Binding: &model.PluginBinding{Name: "passt"}}
	unplugged := bound("gone")
	unplugged.State = model.InterfaceStateAbsent
	replug := map[string]string{migration.ReplugAnnotation: migration.ReplugValue}
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
			name: "target, opt-in annotation with another value", vmi: vmiWith(target, map[string]string{migration.ReplugAnnotation: "yes-please"}, bound("udn")), wantRefuse: true,
			wantInMsg: []string{migration.ReplugAnnotation, `"replug"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := migration.CheckTarget(tt.vmi, binding)
			if !tt.wantRefuse {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, migration.ErrRefused)
			for _, s := range tt.wantInMsg {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), "yes-please", "annotation values are never echoed")
		})
	}
}

func TestCheckTarget_NilVMI(t *testing.T) {
	assert.NoError(t, migration.CheckTarget(nil, binding))
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
