// Package model derives, for every VMI interface bound to this binding, what the guest needs (MAC,
// addresses, gateways, routes, DNS, MTU, DHCP, device-info) from the VMI and a downwardapi.Snapshot.
// It is pure: no I/O, no waiting, never a panic; wrong input is an *InputError, late input is a Missing.
// Where only network-status has an address (no prefix), it assumes /24 (IPv4) or /64 (IPv6), widened
// until any same-family gateway is on-link, and sets PrefixKnown=false. Called by pkg/pipeline (Derive once
// per snapshot, FindPodNIC, the Missing and mismatch checks on the Derivation), pkg/binding (the VMI, the
// migration-target check), cmd/sidecar (DecodeVMI and Options, the values it hands the pipeline), and
// pkg/cloudinit, pkg/domain and pkg/ifacecache, which consume its []BoundInterface.
package model
