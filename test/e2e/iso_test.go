package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIsoRootFile_ReadsFilesOfACloudInitDiskBuiltLikeKubeVirts builds a NoCloud disk with the
// arguments KubeVirt v1.8 passes to xorrisofs (pkg/cloud-init/cloud-init.go) and reads it back.
func TestIsoRootFile_ReadsFilesOfACloudInitDiskBuiltLikeKubeVirts(t *testing.T) {
	xorrisofs, err := exec.LookPath("xorrisofs")
	if err != nil {
		t.Skipf("xorrisofs not installed (%v): it is the tool KubeVirt builds cloud-init disks with", err)
	}
	src := t.TempDir()
	files := map[string]string{
		"user-data":      "#cloud-config\n",
		"meta-data":      "instance-id: 1234\nlocal-hostname: vm\n",
		"network-config": "version: 1\nconfig:\n- type: physical\n  mac_address: \"02:00:00:c0:ff:ee\"\n",
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(content), 0o644))
	}
	iso := filepath.Join(t.TempDir(), "noCloud.iso")
	out, err := exec.Command(xorrisofs, "-output", iso, "-volid", "cidata", "-joliet", "-rock", "-partition_cyl_align", "on", src).CombinedOutput()
	require.NoError(t, err, "%s", out)
	image, err := os.ReadFile(iso)
	require.NoError(t, err)

	for name, content := range files {
		got, err := isoRootFile(image, name)
		require.NoError(t, err, name)
		assert.Equal(t, content, string(got), name)
	}
	_, err = isoRootFile(image, "vendor-data")
	assert.ErrorIs(t, err, ErrISOFileNotFound)
}

func TestIsoRootFile_RejectsWhatIsNotAnISO(t *testing.T) {
	cases := map[string][]byte{
		"empty":           nil,
		"short":           make([]byte, 17*isoSectorSize-1),
		"no CD001 header": make([]byte, 20*isoSectorSize),
	}
	for name, image := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := isoRootFile(image, "network-config")
			assert.Error(t, err)
			assert.NotErrorIs(t, err, ErrISOFileNotFound)
		})
	}
}
