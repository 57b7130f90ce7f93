package plugin

import (
	"fmt"
	"os"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// sidecarBin is the binary under test, built once by `make build` (as the image builds it).
var sidecarBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plugin-bin")
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
