package plugin

import (
	"os"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// sidecarBin is the binary under test, built once by `make build` (as the image builds it).
var sidecarBin string

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, &sidecarBin))
}
