// Package downwardapi tests pkg/downwardapi against kubelet's own DownwardAPI writer (AtomicWriter)
// and formatter (fieldpath.FormatMap): late volumes, changes, unchanged rewrites, leaks over 10,000
// swaps, and the swap-to-Wait latency benchmark. It holds tests only.
package downwardapi
