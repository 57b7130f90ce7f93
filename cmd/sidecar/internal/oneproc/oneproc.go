package oneproc

import (
	"os"
	"runtime"
)

// One P: the sidecar's work is a handful of short hook calls per VM start, each on a fresh gRPC
// connection (virt-launcher's hooks/manager.go dials per call). With more Ps every connection hands
// its goroutines between OS threads, and the futex wake-ups cost 25% more CPU per call and ~10%
// more latency on 2 CPUs (test/bench). An empty GOMAXPROCS counts as unset, as the runtime reads it.
func init() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
