// Package pipeline owns the order of the sidecar's work for one hook call: a Call, built from the VMI,
// derives the bound interfaces once, the model and the pod NIC once per downwardapi.Snapshot, and the NIC
// plans and the user's parsed networkData once, then hands out each output: the VF hostdevs in the domain
// (OnDefineDomain), the guest network config merged into the cloud-init data (PreCloudInitIso), the
// interface cache entries (Cache), the warnings about silent cases, and render's Report. It never
// waits itself (the caller's Wait does), does no I/O and never logs. Called by pkg/binding (the hooks)
// and cmd/sidecar render (Report).
package pipeline
