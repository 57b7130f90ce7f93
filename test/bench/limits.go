package bench

// MemoryLimitBytes is the sidecar container's memory limit the docs recommend (docs/operations.md "Sizing",
// manifests/kubevirt: supportContainerResources, type sidecar), under KubeVirt's own 64M for dedicated-CPU
// VMIs (renderresources.go sidecarResources). It is what the tests hold the sidecar to: test/container in a
// memory cgroup with this limit, test/integration and test/hostile by the process's peak RSS.
const MemoryLimitBytes = 56 << 20

// PeakRSSLimitKiB bounds the sidecar's VmHWM where a test reads the process, not a cgroup: the memory cgroup
// also charges the binary's page cache, about 1.5 MiB beyond the RSS (test/container measures both).
const PeakRSSLimitKiB = MemoryLimitBytes>>10 - 2<<10

// LegalPeakBytes bounds the sidecar's memory peak, page cache included, under every legal input so that the
// documented limit leaves it 15% headroom: the limit is 1.15 times the bound. LegalPeakRSSKiB is the same bound
// for a test that reads the process's VmHWM, less the page cache.
const (
	LegalPeakBytes  = MemoryLimitBytes * 100 / 115
	LegalPeakRSSKiB = LegalPeakBytes>>10 - 2<<10
)
