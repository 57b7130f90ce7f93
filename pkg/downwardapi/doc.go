// Package downwardapi owns the sidecar's DownwardAPI inputs: pure parsers for the device-info file, the
// pod-info labels/annotations files and the annotations in them, and a Watcher that publishes immutable
// Snapshots when kubelet swaps a volume's ..data symlink. It never polls, never blocks start-up waiting for
// data and never panics on hostile input; a directory not there yet is watched through its nearest ancestor.
// Called by pkg/binding (NewWatcher, Snapshot, Wait, Next, Close), pkg/model and pkg/pipeline (which read
// the Snapshots) and cmd/sidecar render (SnapshotFromMaps, from a pod's JSON).
package downwardapi
