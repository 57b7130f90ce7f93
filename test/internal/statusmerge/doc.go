// Package statusmerge owns the stable merge of vmi.status.interfaces for virt-handler-side code:
// pod-cache addresses per family are kept, guest-agent data adds absent families and never clears a
// present one, link-local never displaces a routable address. It is pure (no I/O) and uses
// kubevirt.io/api types. It lives in the test module because nothing in the sidecar calls it and
// KubeVirt will not import our module: the KubeVirt patch series (patches/kubevirt) writes the merge in
// KubeVirt's own code, and this package is the reference oracle its differential tests compare
// against. See package ifacecache's doc for the virt-handler integration.
package statusmerge
