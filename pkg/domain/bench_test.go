package domain

import (
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// BenchmarkApply measures one OnDefineDomain's worth of work on a KubeVirt-shaped domain that
// already carries our hostdev (the second and later calls), against the 2 ms hook budget.
func BenchmarkApply(b *testing.B) {
	ifaces := []model.BoundInterface{udnIface()}
	src, err := Apply([]byte(kubevirtDomain), ifaces)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Apply(src, ifaces); err != nil {
			b.Fatal(err)
		}
	}
}
