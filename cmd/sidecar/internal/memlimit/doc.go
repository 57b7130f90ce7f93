// Package memlimit gives the sidecar a soft Go memory limit (runtime/debug.SetMemoryLimit) unless the
// environment sets GOMEMLIMIT. It owns that one setting, decides nothing else, and is imported for
// its side effect by cmd/sidecar only.
package memlimit
