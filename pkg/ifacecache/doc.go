// Package ifacecache owns KubeVirt PodIfaceCacheData files for bound interfaces (Writer.Sync: one
// file per interface at <dir>/<vmi-uid>/<iface>, atomic, rewritten only on change). It must never import
// kubevirt.io/kubevirt or kubevirt.io/api (the sidecar stays lean), never write outside its directory,
// never follow a symlink below it (the compute container can write there), and never let an
// unvalidated name become a path. Called by pkg/binding (Writer, the cache refresher) and pkg/pipeline
// (BuildEntries, for the render report).
//
// virt-handler reads these files with the patch series in patches/kubevirt (its README tells how, and
// how KubeVirt's own cache reader reads them unchanged).
package ifacecache
