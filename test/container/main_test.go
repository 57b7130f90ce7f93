package container

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// testVersion is what the image is stamped with: `make image-local VERSION=...` puts it into the binary
// (-X main.version) and into the image's org.opencontainers.image.version label.
const testVersion = "v0.0.0-container-test"

// Set by TestMain: the podman of this package, the image it built, and the bare binary the image holds
// (copied out of the repository's bin/ before any test runs). skipReason is set when this machine
// cannot run containers at all; every test then skips saying so.
var (
	pm         engine
	image      = "localhost/sriov-udn-binding:container-test"
	bareBin    string
	skipReason string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root: podman runs the image as root here, and KubeVirt's hook Manager is fixed to " + harness.HooksRoot
	case !onPath("podman") || !onPath("runc"):
		skipReason = "needs podman and runc on PATH (apt-get install podman runc; .ci/run installs them)"
	}
	if skipReason != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "sriov-udn-container-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing the podman storage %s: %v\n", dir, err)
		}
	}()
	pm = engine{root: filepath.Join(dir, "storage"), runroot: filepath.Join(dir, "run"), tmpdir: filepath.Join(dir, "libpod")}
	// Containers and images first, so that nothing of the storage is mounted when it is removed (not
	// `podman system reset`: it also removes the host's podman networks).
	defer func() {
		for _, args := range [][]string{{"rm", "--all", "--force", "--time", "0"}, {"rmi", "--all", "--force"}} {
			if _, err := pm.run(args...); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	if err := buildImage(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The bare binary is the very file the image was built from; copied, so that nothing that rebuilds
	// bin/ later changes it.
	bareBin = filepath.Join(dir, "bin", "sriov-udn-binding")
	if err := copyFile(filepath.Join(harness.RepoRoot(), "bin", "sriov-udn-binding"), bareBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// buildImage runs `make image-local` with this package's podman, as a user would with their own.
func buildImage() error {
	t0 := time.Now()
	cmd := exec.Command("make", "--no-print-directory", "image-local",
		"PODMAN=podman "+strings.Join(pm.global(), " "), "LOCAL_IMAGE="+image, "VERSION="+testVersion)
	cmd.Dir = harness.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make image-local: %w\n%s", err, out)
	}
	fmt.Printf("make image-local (make build, podman build, vfs storage): %s\n", time.Since(t0).Round(10*time.Millisecond))
	return nil
}

func onPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("open the binary make image-local built: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return out.Close()
}

// requireEngine skips, saying why, when TestMain found no way to run containers here.
func requireEngine(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip("skipping: " + skipReason)
	}
}
