package integration

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// The binary these tests drive must be the one that ships: the image and the harness build through
// `make build`, and the binary links neither gRPC nor KubeVirt's or Kubernetes' modules (issue 26: the
// transport is pkg/hooks/grpcwire, the wire messages pkg/hooks/wire.go; gRPC's server was about two thirds
// of the idle RSS). These tests still talk to it with gRPC's and KubeVirt's own clients.
func TestSidecarBinary_LinksNoGRPCNorKubeVirt(t *testing.T) {
	info, err := buildinfo.ReadFile(sidecarBin)
	require.NoError(t, err)
	require.NotEmpty(t, info.Deps, "precondition: the binary's build info lists its modules")
	for _, d := range info.Deps {
		for _, banned := range []string{"google.golang.org/grpc", "google.golang.org/genproto", "kubevirt.io/", "k8s.io/", "github.com/golang/protobuf"} {
			assert.False(t, strings.HasPrefix(d.Path, banned), "the sidecar binary links %s %s", d.Path, d.Version)
		}
	}
	for _, s := range info.Settings {
		assert.NotEqual(t, "-tags", s.Key, "built with tags %q", s.Value)
	}

	containerfile, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile"))
	require.NoError(t, err)
	assert.Contains(t, string(containerfile), "make --no-print-directory build check-build", "the image builds and checks through make")
	ignore, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile.dockerignore"))
	require.NoError(t, err)
	assert.Contains(t, string(ignore), "!Makefile", "the image build context has the Makefile")
}

// cmd/sidecar/internal/oneproc sets GOMAXPROCS=1 in its init; it only saves memory if that runs before
// the inits of the modules that allocate (Go orders independent inits by import path, so a module rename
// could reverse it). GODEBUG=inittrace=1 prints every package init in order.
func TestSidecarBinary_OneProcInitRunsBeforeModulesAllocate(t *testing.T) {
	cmd := exec.Command(sidecarBin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run())
	// "init <package> @0.77 ms, 0.14 ms clock, 3464 bytes, 9 allocs"
	line := regexp.MustCompile(`^init (\S+) @.*, (\d+) bytes, \d+ allocs$`)
	seenOneProc, checked := false, 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		pkg, allocated := m[1], m[2] != "0"
		switch {
		case strings.HasSuffix(pkg, "/cmd/sidecar/internal/oneproc"):
			seenOneProc = true
		case strings.Contains(strings.Split(pkg, "/")[0], ".") && allocated: // not the standard library
			checked++
			assert.True(t, seenOneProc, "%s allocates in its init before oneproc set one P", pkg)
		}
	}
	require.True(t, seenOneProc, "oneproc's init is in the binary")
	assert.Positive(t, checked, "module inits that allocate were seen")
}
