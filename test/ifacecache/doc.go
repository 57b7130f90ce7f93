// Package ifacecache proves pkg/ifacecache against KubeVirt itself (each version of the matrix that
// make test-integration runs): its pod interface cache
// reader reads what our Writer writes, its NetStat puts those addresses into vmi.status.interfaces
// for our hostdev alias, and, fed the same guest-agent reports, its NetStat flaps where our merge
// does not. It must never be imported by the sidecar: it drags kubevirt.io/kubevirt in.
package ifacecache
