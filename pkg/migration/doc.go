// Package migration decides whether a VMI with interfaces bound to this binding may be live-migrated:
// stock KubeVirt detaches every "ua-sriov-" hostdev on the source and re-attaches only core SR-IOV VFs
// on the target, so a migration would leave the VM running without its VF. The decision is pure (no
// I/O, never a panic). It must never refuse a VMI that is not in a migration target. Called by pkg/binding
// only, at the start of OnDefineDomain, which virt-launcher's prepareMigrationTarget calls before the source
// detaches anything.
package migration
