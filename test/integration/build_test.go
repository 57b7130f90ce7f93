package integration

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// The binary these tests drive must be the one that ships: the image and the harness build through
// `make build`. It serves its gRPC with grpc-go and KubeVirt's own generated hook types, and links none of
// Kubernetes' API types (its VMI and NetworkStatus types are its own, checked against KubeVirt's and the NAD
// client's in test/), built with grpc-go's grpcnotrace tag only.
func TestSidecarBinary_ServesGRPCGoWithKubeVirtsHookTypes(t *testing.T) {
	info, err := buildinfo.ReadFile(sidecarBin)
	require.NoError(t, err)
	require.NotEmpty(t, info.Deps, "precondition: the binary's build info lists its modules")
	linked := map[string]string{}
	for _, d := range info.Deps {
		linked[d.Path] = d.Version
		for _, banned := range []string{"kubevirt.io/api", "k8s.io/"} {
			assert.False(t, strings.HasPrefix(d.Path, banned), "the sidecar binary links %s %s", d.Path, d.Version)
		}
	}
	assert.Contains(t, linked, "google.golang.org/grpc")
	assert.Contains(t, linked, "kubevirt.io/kubevirt")
	bin, err := os.ReadFile(sidecarBin)
	require.NoError(t, err)
	for _, pkg := range []string{"kubevirt.io/kubevirt/pkg/hooks/info.", "kubevirt.io/kubevirt/pkg/hooks/v1alpha2.",
		"kubevirt.io/kubevirt/pkg/hooks/v1alpha3.", "google.golang.org/grpc.(*Server).Serve"} {
		assert.True(t, bytes.Contains(bin, []byte(pkg)), "the binary has no function of %s", pkg)
	}
	tags := ""
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	assert.Equal(t, "grpcnotrace", tags, "the build tags")

	containerfile, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile"))
	require.NoError(t, err)
	assert.Contains(t, string(containerfile), "make --no-print-directory build check-build", "the image builds and checks through make")
	ignore, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "images", "Containerfile.dockerignore"))
	require.NoError(t, err)
	assert.Contains(t, string(ignore), "!Makefile", "the image build context has the Makefile")
}
