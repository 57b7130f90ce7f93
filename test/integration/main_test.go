package integration

import (
	"os"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// sidecarBin is built once for the package by TestMain.
var sidecarBin string

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, &sidecarBin))
}
