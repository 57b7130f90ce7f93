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

// The binary these tests drive must be the one that ships: the Makefile defines the build tags once,
// the image and the harness build through `make build`, and those tags leave gRPC's tracing (and
// text/template) out.
func TestSidecarBinary_IsBuiltWithTheShippedTags(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^GOTAGS\s*:=\s*(.*?)\s*$`).FindSubmatch(makefile)
	require.NotNil(t, m, "Makefile defines GOTAGS")
	gotags := string(m[1])
	assert.Equal(t, "grpcnotrace", gotags, "Makefile GOTAGS")
	assert.Contains(t, string(makefile), "-tags '$(GOTAGS)'", "make build uses GOTAGS")

	info, err := buildinfo.ReadFile(sidecarBin)
	require.NoError(t, err)
	tags := ""
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	assert.Equal(t, gotags, tags, "tags of the binary the harness built")

	containerfile, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile"))
	require.NoError(t, err)
	assert.Contains(t, string(containerfile), "make --no-print-directory build check-build", "the image builds and checks through make")
	assert.NotContains(t, string(containerfile), gotags, "the image names no build tags of its own")
	ignore, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile.dockerignore"))
	require.NoError(t, err)
	assert.Contains(t, string(ignore), "!Makefile", "the image build context has the Makefile")
}

// cmd/sidecar/internal/oneproc sets GOMAXPROCS=1 in its init; it only saves memory if that runs before
// the inits of gRPC and protobuf that allocate (Go orders independent inits by import path, so a
// module rename could reverse it). GODEBUG=inittrace=1 prints every package init in order.
func TestSidecarBinary_OneProcInitRunsBeforeGRPCAndProtobufAllocate(t *testing.T) {
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
		case strings.HasPrefix(pkg, "google.golang.org/") && allocated:
			checked++
			assert.True(t, seenOneProc, "%s allocates in its init before oneproc set one P", pkg)
		}
	}
	require.True(t, seenOneProc, "oneproc's init is in the binary")
	assert.Positive(t, checked, "gRPC and protobuf inits were seen")
}
