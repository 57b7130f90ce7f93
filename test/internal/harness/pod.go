package harness

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/kubernetes/pkg/fieldpath"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

// SocketName is the sidecar's hook socket file name (cmd/sidecar's --socket-name default).
const SocketName = "sriov-udn-binding.sock"

// Volume is a DownwardAPI volume written with kubelet's own AtomicWriter, as kubelet writes it: a new
// timestamped directory, the ..data symlink swapped, the user-visible links. Its methods return errors (no
// testing.TB), so that the bench, a program, writes its volumes with it too.
type Volume struct {
	dir    string
	writer *volumeutil.AtomicWriter
}

// NewVolume prepares dir (created if needed) as a DownwardAPI volume.
func NewVolume(dir string) (*Volume, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create volume dir %s: %w", dir, err)
	}
	w, err := volumeutil.NewAtomicWriter(dir, "test")
	if err != nil {
		return nil, fmt.Errorf("atomic writer for %s: %w", dir, err)
	}
	return &Volume{dir: dir, writer: w}, nil
}

// Dir is the volume's directory.
func (v *Volume) Dir() string { return v.dir }

// WritePodInfo projects metadata.labels and metadata.annotations with fieldpath.FormatMap, as the pod-info
// volume does (items labels and annotations, mode 0644); kubelet writes nothing when content is unchanged.
func (v *Volume) WritePodInfo(labels, annotations map[string]string) error {
	return v.write(map[string]volumeutil.FileProjection{
		"labels":      {Data: []byte(fieldpath.FormatMap(labels)), Mode: 0o644},
		"annotations": {Data: []byte(fieldpath.FormatMap(annotations)), Mode: 0o644},
	})
}

// WriteDeviceInfo projects the device-info item network-info: the raw kubevirt.io/network-info value (""
// while the annotation is not yet set), as KubeVirt's device-info volume does.
func (v *Volume) WriteDeviceInfo(networkInfoJSON string) error {
	return v.write(map[string]volumeutil.FileProjection{"network-info": {Data: []byte(networkInfoJSON), Mode: 0o644}})
}

func (v *Volume) write(files map[string]volumeutil.FileProjection) error {
	if err := v.writer.Write(files, nil); err != nil {
		return fmt.Errorf("write DownwardAPI volume %s: %w", v.dir, err)
	}
	return nil
}

// Pod is one virt-launcher pod's volumes for our sidecar, on the host's disk: the hooks emptyDir as the
// compute container (and so the hook Manager) sees it, with the socket and, in the default layout, the
// interface cache; the pod-info and device-info DownwardAPI volumes, each made a kubelet volume on its first
// write (until then absent, as before kubelet mounts it).
type Pod struct {
	HooksDir      string // the socket directory
	SocketName    string // SocketName unless a test gives its pod's sidecar another
	PodInfoDir    string // <data>/downwardapi/podinfo
	DeviceInfoDir string // <data>/podinfo
	CacheDir      string // HooksDir/ifacecache

	podInfo, deviceInfo *Volume
}

// NewPod lays out a pod: hooksDir (created if needed) for the socket and cache, dataDir for the volumes.
func NewPod(hooksDir, dataDir string) (*Pod, error) {
	if err := os.MkdirAll(hooksDir, 0o755); err != nil {
		return nil, fmt.Errorf("create hooks dir %s: %w", hooksDir, err)
	}
	return &Pod{
		HooksDir:      hooksDir,
		SocketName:    SocketName,
		PodInfoDir:    filepath.Join(dataDir, "downwardapi", "podinfo"),
		DeviceInfoDir: filepath.Join(dataDir, "podinfo"),
		CacheDir:      filepath.Join(hooksDir, "ifacecache"),
	}, nil
}

// TestPod is NewPod under SidecarDir(t, suffix) (HooksRoot, where the hook Manager collects the socket),
// with its volumes in t's temporary directory.
func TestPod(t testing.TB, suffix string) *Pod {
	t.Helper()
	p, err := NewPod(SidecarDir(t, suffix), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Socket is the sidecar's hook socket.
func (p *Pod) Socket() string { return filepath.Join(p.HooksDir, p.SocketName) }

// DeviceInfoFile is the device-info volume's network-info file.
func (p *Pod) DeviceInfoFile() string { return filepath.Join(p.DeviceInfoDir, "network-info") }

// Args are the sidecar's flags pointing at the pod's host paths, then extra.
func (p *Pod) Args(extra ...string) []string {
	return append([]string{
		"--socket-dir", p.HooksDir,
		"--socket-name", p.SocketName,
		"--device-info-file", p.DeviceInfoFile(),
		"--pod-info-dir", p.PodInfoDir,
		"--iface-cache-dir", p.CacheDir,
	}, extra...)
}

// WritePodInfo writes the pod-info volume (see Volume.WritePodInfo).
func (p *Pod) WritePodInfo(labels, annotations map[string]string) error {
	if err := ensureVolume(&p.podInfo, p.PodInfoDir); err != nil {
		return err
	}
	return p.podInfo.WritePodInfo(labels, annotations)
}

// WriteDeviceInfo writes the device-info volume (see Volume.WriteDeviceInfo).
func (p *Pod) WriteDeviceInfo(networkInfoJSON string) error {
	if err := ensureVolume(&p.deviceInfo, p.DeviceInfoDir); err != nil {
		return err
	}
	return p.deviceInfo.WriteDeviceInfo(networkInfoJSON)
}

func ensureVolume(v **Volume, dir string) error {
	if *v != nil {
		return nil
	}
	var err error
	*v, err = NewVolume(dir)
	return err
}

// Start runs the sidecar bin on the pod (Args(extra...)) and returns once it listens.
func (p *Pod) Start(t testing.TB, bin string, extra ...string) *Process {
	t.Helper()
	return StartWith(t, nil, bin, p.Args(extra...)...)
}

// StartWith is Start with a hook that adjusts the command before it runs (credentials, environment).
func (p *Pod) StartWith(t testing.TB, adjust func(*exec.Cmd), bin string, extra ...string) *Process {
	t.Helper()
	return StartWith(t, adjust, bin, p.Args(extra...)...)
}

// LockedBuffer is a bytes.Buffer that one goroutine (a process's output) writes while another reads it.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
