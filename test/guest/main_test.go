package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
)

// TestMain sets KubeVirt's cloud-init data directory once for the test binary, as virt-launcher does at
// start-up (cmd/virt-launcher/virt-launcher.go): it is a package variable in KubeVirt, shared by every test
// (each VMI has its own subdirectory), so no test sets it to a directory of its own that ends with it.
//
// The matrix scenarios run two at a time; the VF, migration and VFIO tests run one after the other, after
// the matrix. Running the VF and migration guests beside the matrix scenarios was measured on a cold run:
// the guest suite took as long either way (the TCG guests keep both cores busy), so they stay
// sequential, which loads the machine less.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "guest-cloud-init-data-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "guest tests: temporary directory for KubeVirt's cloud-init data: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := cloudinit.SetLocalDirectory(filepath.Join(dir, "cloud-init-data")); err != nil {
		fmt.Fprintf(os.Stderr, "guest tests: KubeVirt's cloudinit.SetLocalDirectory: %v\n", err)
		return 1
	}
	return m.Run()
}
