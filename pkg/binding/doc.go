// Package binding is the sidecar's hook handler (pkg/hooks' Handler): for each hook call it decodes the
// VMI, refuses a migration target it cannot serve (migration.go), waits for the DownwardAPI data the
// pipeline says it needs (woken by the watcher, never polling), runs the pipeline and logs its warnings;
// after a call it keeps the interface cache current in the background, retrying failed writes with backoff.
// It must never decide what goes into the domain, the cloud-init data or the cache (pkg/pipeline does),
// never fail a hook because of the cache, and never panic. Called by cmd/sidecar (wiring). The transport
// calls it through its Handler interface, and neither package imports the other.
package binding
