package integration

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// The binary these tests drive must be the one that ships: the Makefile, the image and the harness
// build it with the same tags, and those tags leave gRPC's tracing (and text/template) out.
func TestSidecarBinary_IsBuiltWithTheShippedTags(t *testing.T) {
	info, err := buildinfo.ReadFile(sidecarBin)
	require.NoError(t, err)
	tags := ""
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	assert.Equal(t, harness.BuildTags, tags, "tags of the binary the harness built")

	makefile, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^GOTAGS\s*:=\s*(.*?)\s*$`).FindSubmatch(makefile)
	require.NotNil(t, m, "Makefile defines GOTAGS")
	assert.Equal(t, harness.BuildTags, string(m[1]), "Makefile GOTAGS")
	assert.Contains(t, string(makefile), "-tags '$(GOTAGS)'", "make build uses GOTAGS")

	containerfile, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile"))
	require.NoError(t, err)
	assert.Contains(t, string(containerfile), "go build -trimpath -buildvcs=false -tags "+harness.BuildTags+" ", "image build")
	assert.Contains(t, string(containerfile), "grep -q -- '-tags="+harness.BuildTags+"'", "image build check")
}
