package harness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// PodInfo is a pod-info Volume as test/plugin (a module of its own until it joins test/) still writes it;
// every package of this module uses Volume or Pod. Delete it with test/plugin's last use.
type PodInfo struct{ v *Volume }

// NewPodInfo prepares dir as a pod-info volume.
func NewPodInfo(t testing.TB, dir string) *PodInfo {
	t.Helper()
	v, err := NewVolume(dir)
	require.NoError(t, err)
	return &PodInfo{v}
}

// Write projects labels and annotations.
func (p *PodInfo) Write(labels, annotations map[string]string) error {
	return p.v.WritePodInfo(labels, annotations)
}
