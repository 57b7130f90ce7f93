// Package pipeline composes the sidecar's work for one VMI and one downwardapi.Snapshot: the
// interfaces the model derives, the VF hostdevs in the domain, the guest network config merged into
// the cloud-init data, the interface cache entries, and the warnings about silent cases. It is the
// one composition: pkg/hooks (after waiting for data) and `render` call exactly these functions, so
// they cannot disagree. It never waits, does no I/O and never logs: callers do.
package pipeline
