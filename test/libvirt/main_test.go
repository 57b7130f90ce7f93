package libvirt_test

import (
	"os"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// sidecarBin is the binary the read-back test drives through KubeVirt's hook Manager, built once by
// `make build` (as the image builds it).
var sidecarBin string

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, &sidecarBin))
}
