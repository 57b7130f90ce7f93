// Package netval owns the rules for network values read from untrusted input: a 48-bit MAC, IP
// addresses and the unicast check, DNS names, MTU bounds and PCI addresses. Called by pkg/downwardapi,
// pkg/model, pkg/cloudinit, pkg/domain and pkg/pipeline, so that a value accepted at the input is accepted
// all the way down.
// It is a leaf: it imports only the standard library, does no I/O and keeps no state.
package netval
