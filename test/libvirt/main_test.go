package libvirt_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// sidecarBin is the binary the read-back test drives through KubeVirt's hook Manager, built once by
// `make build` (as the image builds it).
var sidecarBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "libvirt-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin, err = harness.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
