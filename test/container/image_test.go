package container

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

func TestImage_InspectShowsUser107EntrypointAndVersionLabel(t *testing.T) {
	requireEngine(t)
	out, err := pm.run("image", "inspect", image)
	require.NoError(t, err)
	var got []struct {
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Env        []string
			Labels     map[string]string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got, 1)
	cfg := got[0].Config
	assert.Equal(t, "107:107", cfg.User, "the uid/gid of KubeVirt's non-root virt-launcher pods")
	assert.Equal(t, []string{"/sriov-udn-binding"}, cfg.Entrypoint)
	assert.Empty(t, cfg.Cmd, "KubeVirt passes no args to a binding sidecar (pkg/network/netbinding/netbinding.go)")
	assert.Equal(t, testVersion, cfg.Labels["org.opencontainers.image.version"])
	assert.Equal(t, "sriov-udn-binding", cfg.Labels["org.opencontainers.image.title"])
	// The Go runtime's settings, which the tests and the bench give the bare binary too (harness.ImageEnv).
	want, err := harness.ImageEnv()
	require.NoError(t, err)
	for _, kv := range want {
		assert.Contains(t, cfg.Env, kv)
	}

	// The entrypoint runs, as 107, with no shell to start it, and reports the version the label names.
	version, err := pm.run("run", "--rm", "--network", "none", "--read-only", "--read-only-tmpfs=false",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", image, "--version")
	require.NoError(t, err)
	assert.Equal(t, testVersion, strings.TrimSpace(version))
}

func TestImage_HoldsOneStaticBinaryAndNoShell(t *testing.T) {
	requireEngine(t)
	dir := filepath.Join(t.TempDir(), "oci")
	_, err := pm.run("save", "--format", "oci-dir", "--output", dir, image)
	require.NoError(t, err)
	layers := ociLayers(t, dir)
	require.Len(t, layers, 1, "scratch plus one COPY: one layer")

	files := map[string][]byte{}
	var others []string
	for _, layer := range layers {
		tr := tar.NewReader(bytes.NewReader(layer))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			name := strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
			switch h.Typeflag {
			case tar.TypeDir:
			case tar.TypeReg:
				files[name], err = io.ReadAll(tr)
				require.NoError(t, err)
			default:
				others = append(others, fmt.Sprintf("%s (type %c)", name, h.Typeflag))
			}
		}
	}
	require.Len(t, files, 1, "one regular file in the whole image; have %v", keys(files))
	bin, ok := files["sriov-udn-binding"]
	require.True(t, ok, "the file is the entrypoint /sriov-udn-binding; have %v", keys(files))
	assert.Empty(t, others, "no links, devices or other entries (a shell would be /bin/sh)")

	bare, err := os.ReadFile(bareBin)
	require.NoError(t, err)
	assert.Equal(t, sha256.Sum256(bare), sha256.Sum256(bin), "the image holds the binary make build made")

	f, err := elf.NewFile(bytes.NewReader(bin))
	require.NoError(t, err)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "static: no program interpreter")
		assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "static: no dynamic section")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs)

	info, err := buildinfo.Read(bytes.NewReader(bin))
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	assert.Equal(t, "0", settings["CGO_ENABLED"])
	assert.Equal(t, "grpcnotrace", settings["-tags"], "the Makefile's build tags")
	linked := map[string]bool{}
	for _, d := range info.Deps {
		linked[d.Path] = true
		assert.False(t, strings.HasPrefix(d.Path, "k8s.io/") || strings.HasPrefix(d.Path, "kubevirt.io/api"),
			"the image's binary links %s", d.Path)
	}
	assert.True(t, linked["google.golang.org/grpc"] && linked["kubevirt.io/kubevirt"], "grpc-go and KubeVirt's hook types")
	// -trimpath leaves -ldflags out of the build info; the stamped string is in the data.
	assert.True(t, bytes.Contains(bin, []byte(testVersion)), "stamped with -X main.version=%s", testVersion)
}

// ociLayers reads an `oci-dir` image layout: index.json -> the manifest -> each layer blob, unpacked
// from gzip where the media type says so.
func ociLayers(t *testing.T, dir string) [][]byte {
	t.Helper()
	blob := func(digest string) []byte {
		algo, hex, ok := strings.Cut(digest, ":")
		require.True(t, ok, "digest %q", digest)
		b, err := os.ReadFile(filepath.Join(dir, "blobs", algo, hex))
		require.NoError(t, err)
		return b
	}
	type descriptor struct{ MediaType, Digest string }
	var index struct{ Manifests []descriptor }
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &index))
	require.Len(t, index.Manifests, 1)
	var manifest struct{ Layers []descriptor }
	require.NoError(t, json.Unmarshal(blob(index.Manifests[0].Digest), &manifest))
	var out [][]byte
	for _, l := range manifest.Layers {
		b := blob(l.Digest)
		if strings.HasSuffix(l.MediaType, "+gzip") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			require.NoError(t, err)
			b, err = io.ReadAll(zr)
			require.NoError(t, err)
		}
		out = append(out, b)
	}
	return out
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
