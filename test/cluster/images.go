package cluster

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// PauseImage is the node's sandbox image (test/cmd/cluster-pause), imported before kubelet needs it.
const PauseImage = "localhost/cluster/pause:1"

// ImageFile is one file of an image layer.
type ImageFile struct {
	Mode int64
	Data []byte
	// Caps is the file's security.capability extended attribute (VFSCaps), as setcap writes it.
	Caps []byte
}

// Layer is one image layer: a directory's whole tree (a Debian root), and files added or put in place of the
// tree's. Images that share a *Layer share it in the archive.
type Layer struct {
	Root  string
	Files map[string]ImageFile // path in the image, without the leading slash
}

// Image is an image of one or more layers, written as part of a docker-archive tar that `ctr images import`
// reads: no registry and no container engine's storage.
type Image struct {
	Tag        string
	Layers     []*Layer
	Entrypoint []string
	User       string
}

// VFSCaps is the security.capability attribute (struct vfs_cap_data, revision 2) granting caps permitted and
// effective: what `setcap <caps>=+ep` writes.
func VFSCaps(caps ...uint) []byte {
	var permitted [2]uint32
	for _, c := range caps {
		permitted[c/32] |= 1 << (c % 32)
	}
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|0x1) // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	binary.LittleEndian.PutUint32(b[4:], permitted[0])
	binary.LittleEndian.PutUint32(b[12:], permitted[1])
	return b
}

// WriteArchive writes the images into one docker-archive tar at path; each layer is written once, to a file
// beside path, then copied in.
func WriteArchive(path string, images ...Image) error {
	type written struct{ file, diffID string }
	layers := map[*Layer]written{}
	defer func() {
		for _, w := range layers {
			_ = os.Remove(w.file)
		}
	}()
	for _, img := range images {
		for _, l := range img.Layers {
			if _, ok := layers[l]; ok {
				continue
			}
			file := fmt.Sprintf("%s.layer-%d", path, len(layers))
			diffID, err := writeLayer(file, l)
			if err != nil {
				return fmt.Errorf("image %s: layer: %w", img.Tag, err)
			}
			layers[l] = written{file, diffID}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	type manifestEntry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []manifestEntry
	added := map[string]bool{}
	for _, img := range images {
		var diffIDs, names []string
		for _, l := range img.Layers {
			w := layers[l]
			name := strings.TrimPrefix(w.diffID, "sha256:") + "/layer.tar"
			diffIDs, names = append(diffIDs, w.diffID), append(names, name)
			if added[name] {
				continue
			}
			lf, err := os.Open(w.file)
			if err != nil {
				return fmt.Errorf("image %s: %w", img.Tag, err)
			}
			st, err := lf.Stat()
			if err == nil {
				err = add(name, st.Size(), lf)
			}
			_ = lf.Close()
			if err != nil {
				return fmt.Errorf("image %s: %w", img.Tag, err)
			}
			added[name] = true
		}
		config, err := json.Marshal(map[string]any{
			"architecture": "amd64", "os": "linux",
			"config": map[string]any{"Entrypoint": img.Entrypoint, "User": img.User,
				"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
			"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
		})
		if err != nil {
			return fmt.Errorf("image %s config: %w", img.Tag, err)
		}
		sum := sha256.Sum256(config)
		configName := hex.EncodeToString(sum[:]) + ".json"
		if err := add(configName, int64(len(config)), strings.NewReader(string(config))); err != nil {
			return fmt.Errorf("image %s config: %w", img.Tag, err)
		}
		manifest = append(manifest, manifestEntry{Config: configName, RepoTags: []string{img.Tag}, Layers: names})
	}
	m, err := json.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("image archive manifest: %w", err)
	}
	if err := add("manifest.json", int64(len(m)), strings.NewReader(string(m))); err != nil {
		return fmt.Errorf("image archive manifest: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	return f.Close()
}

// skipped are the root's directories whose content never goes into an image: the runtime mounts its own.
func skipped(rel string) bool {
	for _, d := range []string{"proc/", "sys/", "dev/", "tmp/", "run/"} {
		if strings.HasPrefix(rel, d) {
			return true
		}
	}
	return false
}

// writeLayer writes l as a tar at file and returns its diff ID (sha256 of the tar).
func writeLayer(file string, l *Layer) (string, error) {
	f, err := os.Create(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	if l.Root != "" {
		if err := walkRoot(tw, l); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(l.Files))
	for n := range l.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		var parents []string
		for d := filepath.Dir(n); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		if l.Root != "" {
			parents = nil // the root's tree has them, with its modes
		}
		sort.Strings(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
				return "", err
			}
		}
		fl := l.Files[n]
		hdr := &tar.Header{Name: n, Mode: fl.Mode, Size: int64(len(fl.Data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if fl.Caps != nil {
			hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(fl.Caps)}
			hdr.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", err
		}
		if _, err := tw.Write(fl.Data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), f.Close()
}

// walkRoot writes l.Root's tree, but for the files l.Files replaces and the content of skipped directories.
func walkRoot(tw *tar.Writer, l *Layer) error {
	inodes := map[uint64]string{} // hard links: the first path of each inode
	return filepath.WalkDir(l.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(l.Root, p)
		if err != nil || rel == "." {
			return err
		}
		if _, replaced := l.Files[rel]; replaced || skipped(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if info.IsDir() {
			hdr.Name += "/"
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = int(st.Uid), int(st.Gid), "", ""
			if info.Mode().IsRegular() && st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					inodes[st.Ino] = rel
				}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			_ = f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		return nil
	})
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
