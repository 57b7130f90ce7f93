// Package statusmerge owns the stable merge of vmi.status.interfaces for virt-handler-side code:
// pod-cache addresses per family are kept, guest-agent data adds absent families and never clears a
// present one, link-local never displaces a routable address. It is pure (no I/O) and uses
// kubevirt.io/api types, which is why it is apart from package ifacecache: the sidecar never links
// it. See package ifacecache's doc for the virt-handler integration.
package statusmerge
