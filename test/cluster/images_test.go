package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readTar(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, data
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		hdrs[h.Name], data[h.Name] = h, b
	}
}

// The archive is what `ctr images import` reads: a manifest naming each image's config and layers, configs
// whose diff IDs are the layers' digests, a shared layer written once; the layer holds the root's tree (links
// kept, proc/ and dev/ contents left out), the added files with their modes and capabilities.
func TestWriteArchive_DockerArchiveOfTheRootAndTheFiles(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc", "1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "bin", "tool"), []byte("tool"), 0o755))
	require.NoError(t, os.Link(filepath.Join(root, "usr", "bin", "tool"), filepath.Join(root, "usr", "bin", "tool2")))
	require.NoError(t, os.Symlink("tool", filepath.Join(root, "usr", "bin", "alias")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "bin", "replaced"), []byte("old"), 0o644))
	shared := &Layer{Root: root, Files: map[string]ImageFile{
		"usr/bin/replaced": {Mode: 0o755, Data: []byte("new")},
		"usr/bin/monitor":  {Mode: 0o755, Data: []byte("m"), Caps: VFSCaps(10)},
	}}
	out := filepath.Join(t.TempDir(), "images.tar")
	require.NoError(t, WriteArchive(out,
		Image{Tag: "localhost/a:1", Layers: []*Layer{shared}, User: "1001"},
		Image{Tag: "localhost/b:1", Layers: []*Layer{shared}, Entrypoint: []string{"/usr/bin/tool"}}))

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	_, files := readTar(t, f)
	var manifest []struct {
		Config           string
		RepoTags, Layers []string
	}
	require.NoError(t, json.Unmarshal(files["manifest.json"], &manifest))
	require.Len(t, manifest, 2)
	assert.Equal(t, []string{"localhost/a:1"}, manifest[0].RepoTags)
	assert.Equal(t, manifest[0].Layers, manifest[1].Layers, "one layer, shared")
	layerName := manifest[0].Layers[0]
	sum := sha256.Sum256(files[layerName])
	var config struct {
		Config struct{ User string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	require.NoError(t, json.Unmarshal(files[manifest[0].Config], &config))
	assert.Equal(t, []string{"sha256:" + hex.EncodeToString(sum[:])}, config.RootFS.DiffIDs)
	assert.Equal(t, "1001", config.Config.User)

	hdrs, data := readTar(t, bytes.NewReader(files[layerName]))
	assert.Equal(t, []byte("tool"), data["usr/bin/tool"])
	assert.Equal(t, byte(tar.TypeLink), hdrs["usr/bin/tool2"].Typeflag)
	assert.Equal(t, "usr/bin/tool", hdrs["usr/bin/tool2"].Linkname)
	assert.Equal(t, "tool", hdrs["usr/bin/alias"].Linkname)
	assert.Equal(t, []byte("new"), data["usr/bin/replaced"], "Files replace the root's file")
	assert.Equal(t, int64(0o755), hdrs["usr/bin/replaced"].Mode)
	assert.Equal(t, string(VFSCaps(10)), hdrs["usr/bin/monitor"].PAXRecords["SCHILY.xattr.security.capability"])
	assert.Contains(t, hdrs, "proc/")
	assert.NotContains(t, hdrs, "proc/1/", "the runtime mounts its own /proc")
}

// setcap cap_net_bind_service=+ep writes these 20 bytes: read back from a file setcap 2.66 marked, with
// os.getxattr(path, "security.capability").
func TestVFSCaps_AsSetcapWritesThem(t *testing.T) {
	assert.Equal(t, []byte{0x01, 0, 0, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, VFSCaps(10))
}
