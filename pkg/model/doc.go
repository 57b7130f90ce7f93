// Package model derives, for every VMI interface bound to this binding, what the guest needs (MAC,
// addresses, gateways, routes, DNS, MTU, DHCP, device-info) from the VMI and a downwardapi.Snapshot.
// It is pure: no I/O, no waiting, never a panic; wrong input is an *InputError, late input is a Missing.
// Called by pkg/pipeline (Derive, FindPodNIC and the checks on a Derivation), pkg/binding (the VMI, the
// migration-target check), cmd/sidecar (DecodeVMI, Options), and pkg/cloudinit, pkg/domain and
// pkg/ifacecache, which consume its []BoundInterface.
package model
