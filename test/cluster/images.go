package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"
)

// PauseImage is the node's sandbox image (test/cmd/cluster-pause), imported before kubelet needs it.
const PauseImage = "localhost/cluster/pause:1"

// ImageFile is one file of an image layer.
type ImageFile struct {
	Mode int64
	Data []byte
}

// Image is a one-layer image: its files, entrypoint and user, written as a docker-archive tar that `ctr images
// import` reads. No registry, no podman storage: the node's images are few and small.
type Image struct {
	Tag        string
	Files      map[string]ImageFile // path in the image, without the leading slash
	Entrypoint []string
	User       string
}

// WriteArchive writes the images into one docker-archive tar at path.
func WriteArchive(path string, images ...Image) error {
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	type manifestEntry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []manifestEntry
	for _, img := range images {
		layer, err := layerTar(img.Files)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Tag, err)
		}
		diffID := sha256.Sum256(layer)
		layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
		config, err := json.Marshal(map[string]any{
			"architecture": "amd64", "os": "linux",
			"config": map[string]any{"Entrypoint": img.Entrypoint, "User": img.User, "Env": []string{"PATH=/usr/bin:/bin"}},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
		})
		if err != nil {
			return fmt.Errorf("image %s config: %w", img.Tag, err)
		}
		configSum := sha256.Sum256(config)
		configName := hex.EncodeToString(configSum[:]) + ".json"
		if err := add(layerName, layer); err != nil {
			return fmt.Errorf("image %s: %w", img.Tag, err)
		}
		if err := add(configName, config); err != nil {
			return fmt.Errorf("image %s: %w", img.Tag, err)
		}
		manifest = append(manifest, manifestEntry{Config: configName, RepoTags: []string{img.Tag}, Layers: []string{layerName}})
	}
	m, err := json.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("image archive manifest: %w", err)
	}
	if err := add("manifest.json", m); err != nil {
		return fmt.Errorf("image archive manifest: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write image archive %s: %w", path, err)
	}
	return nil
}

func layerTar(files map[string]ImageFile) ([]byte, error) {
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		for d := filepath.Dir(n); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	for _, d := range dirNames {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		f := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: f.Mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// StaticBinary builds a Go main package of the test module as a static binary and returns its bytes.
func StaticBinary(testModuleDir, pkg string) ([]byte, error) {
	out := filepath.Join(os.TempDir(), fmt.Sprintf("cluster-bin-%d", time.Now().UnixNano()))
	defer os.Remove(out)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = testModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("read built %s: %w", pkg, err)
	}
	return b, nil
}

// Import loads a docker-archive tar into the node's containerd (namespace k8s.io, kubelet's), with the ctr of
// the node's trixie root.
func (n *Node) Import(archive string) error {
	cmd := exec.Command(filepath.Join(n.root, "usr", "bin", "ctr"), "-a", n.containerdSocket(), "-n", "k8s.io", "images", "import", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", archive, err, out)
	}
	return nil
}
