package model

import "github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"

// The checks of a Derivation as one call each, for the tests of one check at a time.

func MACMismatches(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) []MACMismatch {
	return Derive(vmi, snap, opts).MACMismatches()
}

func MissingForDomain(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options, skip func(string) bool) []downwardapi.Missing {
	return Derive(vmi, snap, opts).MissingForDomain(skip)
}

func NetworkInfoMismatches(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) []NetworkInfoMismatch {
	return Derive(vmi, snap, opts).NetworkInfoMismatches()
}
