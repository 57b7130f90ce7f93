// Package domain tests pkg/domain against KubeVirt's own code: domains built by KubeVirt's converter
// and its hooks testdata, read back through virt-launcher's unmarshal, and reported by KubeVirt's
// NetStat. It holds tests only.
package domain
