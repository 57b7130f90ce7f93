package memlimit

import (
	"os"
	"runtime/debug"
)

// Limit is the soft limit on the Go runtime's memory (heap, stacks, metadata; not the binary's
// mapped pages). The largest legal inputs (README "Limits": 1 MiB networkData, a domain filling a
// 4 MiB gRPC message) keep at most about 12 MiB live but produce many times that in garbage (the
// XML tokenizer allocates ~17 bytes per byte of domain); with the default pacing (GOGC=100) the heap
// grew to twice its live size and peak RSS reached 45-50 MiB. With this limit the collector runs
// sooner as the heap nears it, and peak RSS stayed under 32 MiB (test/integration
// TestSidecar_LargestLegalInputs_PeakRSSUnder32MiB, make bench). Small hook calls never come near it:
// idle RSS and latency are unchanged. It is soft: live data above it is never refused, the collector
// just runs more.
const Limit = 16 << 20

func init() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(Limit)
	}
}
