package bench

import (
	"fmt"
	"os"

	"k8s.io/kubernetes/pkg/fieldpath"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

// Volume writes a DownwardAPI volume with kubelet's own AtomicWriter, as kubelet does: new
// timestamped dir, ..data symlink swap, user-visible links. (test/internal/harness has the same
// writers bound to testing.TB; the bench is a program, so it keeps its own.)
type Volume struct {
	writer *volumeutil.AtomicWriter
	dir    string
}

// NewVolume prepares dir (created if needed) as a DownwardAPI volume.
func NewVolume(dir string) (*Volume, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create volume dir %s: %w", dir, err)
	}
	w, err := volumeutil.NewAtomicWriter(dir, "bench")
	if err != nil {
		return nil, fmt.Errorf("atomic writer for %s: %w", dir, err)
	}
	return &Volume{writer: w, dir: dir}, nil
}

// WritePodInfo projects labels and annotations with fieldpath.FormatMap (kubelet's format).
func (v *Volume) WritePodInfo(labels, annotations map[string]string) error {
	err := v.writer.Write(map[string]volumeutil.FileProjection{
		"labels":      {Data: []byte(fieldpath.FormatMap(labels)), Mode: 0o644},
		"annotations": {Data: []byte(fieldpath.FormatMap(annotations)), Mode: 0o644},
	}, nil)
	if err != nil {
		return fmt.Errorf("write pod-info volume %s: %w", v.dir, err)
	}
	return nil
}

// WriteDeviceInfo projects the device-info item network-info (raw kubevirt.io/network-info JSON).
func (v *Volume) WriteDeviceInfo(networkInfoJSON string) error {
	err := v.writer.Write(map[string]volumeutil.FileProjection{
		"network-info": {Data: []byte(networkInfoJSON), Mode: 0o644},
	}, nil)
	if err != nil {
		return fmt.Errorf("write device-info volume %s: %w", v.dir, err)
	}
	return nil
}
