package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

const (
	vfMigrationPolicy = "sriov-udn-binding-vf-migration.kubevirt.io"
	migrationPolicy   = "sriov-udn-binding-migration.kubevirt.io"
	vfMigrationAnno   = "sriov-udn.kubevirt.io/vf-migration"
)

var vmimGVR = kubevirtv1.SchemeGroupVersion.WithResource("virtualmachineinstancemigrations")

// withVFMigration sets the opt-in annotation where KubeVirt takes a VMI's annotations from: the VMI's
// metadata, or a VM's spec.template.metadata.
func withVFMigration(value string) mutation {
	return func(t *testing.T, obj *unstructured.Unstructured) {
		path := []string{"metadata", "annotations"}
		if obj.GetKind() == "VirtualMachine" {
			path = []string{"spec", "template", "metadata", "annotations"}
		}
		require.NoError(t, unstructured.SetNestedField(obj.Object, value, append(path, vfMigrationAnno)...))
	}
}

// boundMACs gives each interface of the example bound to sriov-udn a macAddress.
func boundMACs(t *testing.T, obj *unstructured.Unstructured) {
	editInterface(t, obj, "blue", func(m map[string]any) { m["macAddress"] = "02:00:00:00:02:01" })
	editInterface(t, obj, "physnet", func(m map[string]any) { m["macAddress"] = "02:00:00:00:03:01" })
}

// setReplugMethod registers the binding's migration method in the live KubeVirt CR (a merge patch, as
// `kubectl patch --type merge` would), or removes it.
func (c *cluster) setReplugMethod(t *testing.T, on bool) {
	t.Helper()
	migration := `null`
	if on {
		migration = `{"method":"hostdev-replug"}`
	}
	patch := `{"spec":{"configuration":{"network":{"binding":{"` + bindingName + `":{"migration":` + migration + `}}}}}}`
	_, err := c.dynamic.Resource(kvGVR).Namespace(kvNamespace).Patch(context.Background(), kvName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func (c *cluster) storedBinding(t *testing.T) map[string]any {
	t.Helper()
	b, _, err := unstructured.NestedMap(c.getKubeVirt(t).Object, "spec", "configuration", "network", "binding", bindingName)
	require.NoError(t, err)
	return b
}

// createMigration creates a VirtualMachineInstanceMigration of the named VMI, as virtctl migrate,
// evacuation and the workload updater do.
func (c *cluster) createMigration(t *testing.T, namespace, vmiName string) error {
	t.Helper()
	vmim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
		"metadata": map[string]any{"generateName": "migrate-" + vmiName + "-", "namespace": namespace},
		"spec":     map[string]any{"vmiName": vmiName},
	}}
	_, err := c.dynamic.Resource(vmimGVR).Namespace(namespace).Create(context.Background(), vmim, metav1.CreateOptions{})
	return err
}

func testVFMigration(t *testing.T, c *cluster) {
	// The binding-level opt-in is off as the manifests install it: the annotation is refused, LiveMigrate
	// is refused as before.
	eviction := func(v string) mutation {
		return func(t *testing.T, obj *unstructured.Unstructured) { setField(t, obj, v, "evictionStrategy") }
	}
	noBlueMAC := func(t *testing.T, obj *unstructured.Unstructured) {
		editInterface(t, obj, "blue", func(m map[string]any) { delete(m, "macAddress") })
	}
	off := []verdictCase{
		{name: "without the opt-in, LiveMigrate is denied as before", mutate: []mutation{boundMACs, eviction("LiveMigrate")},
			policy: mainPolicy, wantMsg: []string{"evictionStrategy must be set to None", "vf-migration: replug"}},
		{name: "the annotation without the KubeVirt CR's opt-in is denied", mutate: []mutation{boundMACs, withVFMigration("replug"), eviction("LiveMigrate")},
			policy: vfMigrationPolicy, wantMsg: []string{"kubevirt/kubevirt does not register binding sriov-udn with migration.method hostdev-replug"}},
	}
	on := []verdictCase{
		{name: "with the opt-in, LiveMigrate with every bound interface's macAddress is admitted", mutate: []mutation{boundMACs, withVFMigration("replug"), eviction("LiveMigrate")}},
		{name: "with the opt-in, evictionStrategy None is admitted too", mutate: []mutation{boundMACs, withVFMigration("replug")}},
		{name: "with the opt-in, a bound interface without macAddress is denied", mutate: []mutation{boundMACs, noBlueMAC, withVFMigration("replug"), eviction("LiveMigrate")},
			policy: vfMigrationPolicy, wantMsg: []string{"interface blue uses binding sriov-udn without a macAddress", "matches the NIC by MAC"}},
		// evictionStrategy None: with LiveMigrate the main policy denies too, and the server names one.
		{name: "another annotation value is denied and not echoed", mutate: []mutation{boundMACs, withVFMigration("yes-please")},
			policy: vfMigrationPolicy, wantMsg: []string{"takes one value, 'replug'"}, notInMsg: []string{"yes-please"}},
		{name: "with the opt-in, LiveMigrate without the annotation is still denied", mutate: []mutation{boundMACs, eviction("LiveMigrate")},
			policy: mainPolicy, wantMsg: []string{"evictionStrategy must be set to None"}},
	}
	run := func(t *testing.T, cases []verdictCase) { runVerdicts(t, c, cases, nil) }
	t.Run("KubeVirt CR without hostdev-replug", func(t *testing.T) { run(t, off) })

	c.setReplugMethod(t, true)
	t.Cleanup(func() { c.setReplugMethod(t, false) })
	// The policy reads the CR through an informer: wait until the opt-in is seen.
	probe := func() result {
		vm := exampleVM(t)
		for _, m := range []mutation{boundMACs, withVFMigration("replug"), eviction("LiveMigrate")} {
			m(t, vm)
		}
		return c.writeDryRun(t, vm)
	}
	var last result
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = probe()
		return last.err == nil, nil
	}), "opt-in never seen by %s: %v; stored binding: %v", vfMigrationPolicy, last.err, c.storedBinding(t))
	t.Run("KubeVirt CR with hostdev-replug", func(t *testing.T) { run(t, on) })

	t.Run("VirtualMachineInstanceMigration", func(t *testing.T) {
		plain := vmiFrom(t, exampleVM(t))
		require.NoError(t, c.write(t, plain, nil).err)
		optedIn := vmiFrom(t, exampleVM(t))
		boundMACs(t, optedIn)
		withVFMigration("replug")(t, optedIn)
		require.NoError(t, c.write(t, optedIn, nil).err)
		other := vmiFrom(t, exampleVM(t))
		withBinding(t, other, "")
		require.NoError(t, c.write(t, other, nil).err)

		// The params (VMIs) come from an informer too: wait for the denial of the plain VMI's migration.
		var err error
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			err = c.createMigration(t, vmNamespace, plain.GetName())
			return err != nil, nil
		}), "migration of %s never denied", plain.GetName())
		require.True(t, apierrors.IsForbidden(err), "reason Forbidden, got %v", err)
		for _, want := range []string{
			"ValidatingAdmissionPolicy '" + migrationPolicy + "' with binding '" + migrationPolicy + "' denied request",
			"VirtualMachineInstance " + plain.GetName() + " has interfaces that use the sriov-udn binding",
			"not re-attach them on the target",
		} {
			assert.Contains(t, err.Error(), want)
		}
		assert.NoError(t, c.createMigration(t, vmNamespace, optedIn.GetName()), "opted-in VMI migrates")
		assert.NoError(t, c.createMigration(t, vmNamespace, other.GetName()), "a VMI without our binding is not our business")
		assert.NoError(t, c.createMigration(t, vmNamespace, "no-such-vmi"), "KubeVirt's own webhook answers for a missing VMI")
	})
}
