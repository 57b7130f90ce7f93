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
// (each VMI has its own subdirectory), so no test may set it to a directory of its own while another runs.
//
// The guest tests run in parallel with each other (the matrix scenarios, the VF guests, the migration), two
// at a time (go test's -parallel, GOMAXPROCS): a TCG guest keeps about 0.85 of a core busy, so a lone VF
// guest after the matrix would leave the second core mostly idle. What they share is serialised where it must
// be: the hook root by its flock (harness.LockHooksRoot, held by each start's HooksThroughHookManager
// subtest only), cached images and roots by theirs, network namespaces are named per test. The VFIO test
// stays sequential (its node takes both cores, and its nested guest's waits count seconds): go test runs
// it first, alone, then releases the parallel ones.
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
