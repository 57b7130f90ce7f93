package binding

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// A VMI with interfaces bound to this binding may be live-migrated only when the cluster re-plugs its VFs:
// stock KubeVirt detaches every "ua-sriov-" hostdev on the source and re-attaches only core SR-IOV VFs on
// the target, so a migration would leave the VM running without its VF. The decision is pure, and never
// refuses a VMI that is not in a migration target.
const (
	// replugAnnotation on a VMI says that the cluster's virt-handler re-plugs this binding's VFs after
	// a migration (patches/kubevirt 0003). Only then may a migration target proceed. The admission
	// policy (manifests/policy) admits it only when the KubeVirt CR opts the binding in and every bound
	// interface has a macAddress.
	replugAnnotation = "sriov-udn.kubevirt.io/vf-migration"
	// replugValue is the one value of replugAnnotation that allows a migration.
	replugValue = "replug"
)

// errMigrationRefused is the cause of every refusal.
var errMigrationRefused = errors.New("live migration refused")

// checkMigrationTarget returns an error wrapping errMigrationRefused when the VMI is in a migration target
// (model.VirtualMachineInstance.InMigrationTarget) and has interfaces bound to bindingName, unless
// the VMI carries replugAnnotation=replugValue. Failing the target's OnDefineDomain fails KubeVirt's
// target preparation (live-migration-target.go, prepareMigrationTarget: "executing custom preStart
// hooks failed"), and the source starts migrating, and detaching hostdevs, only once the target has
// advertised its address (virt-handler migration-target.go sets TargetNodeAddress after
// SyncMigrationTarget succeeded; controller.go isMigrationSource requires it). The VM keeps running on
// the source with its VF; virt-handler records the message as a warning event on the VMI.
func checkMigrationTarget(vmi *model.VirtualMachineInstance, bindingName string) error {
	if vmi == nil || !vmi.InMigrationTarget() {
		return nil
	}
	bound := model.BoundInterfaceNames(vmi, bindingName)
	if len(bound) == 0 {
		return nil
	}
	value, set := vmi.Annotations[replugAnnotation]
	if set && value == replugValue {
		return nil
	}
	ms := vmi.Status.MigrationState
	why := fmt.Sprintf("KubeVirt detaches their VFs on the source (node %q) and re-attaches only core SR-IOV VFs on the target", ms.SourceNode)
	if set {
		// Never echo the value: annotations are the user's.
		why = fmt.Sprintf("annotation %s must be %q to allow it", replugAnnotation, replugValue)
	}
	return fmt.Errorf("%w: VMI %s/%s, migration %q to pod %q: interfaces %s use binding %q (SR-IOV VFs): %s; the VM keeps running with them",
		errMigrationRefused, vmi.Namespace, vmi.Name, ms.MigrationUID, ms.TargetPod, strings.Join(bound, ","), bindingName, why)
}
