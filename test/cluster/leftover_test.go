package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeftovers_NamesEveryKindOfChange(t *testing.T) {
	before := HostState{
		Sysctls: map[string]string{"vm/overcommit_memory": "0", "kernel/panic": "1"},
		Paths:   map[string]bool{"/etc/cni/net.d": true},
		Cgroups: []string{"/sys/fs/cgroup/cpu/sriov-udn-cluster"},
		Mounts:  []string{"/ (ext4 /dev/vda)"},
		Modules: []string{"tun"},
		Devices: []string{"/dev/null D|c--------- 1:3"},
	}
	after := HostState{
		Sysctls:   map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "1"},
		Paths:     map[string]bool{"/etc/cni/net.d": true, "/var/lib/kubelet": true},
		Cgroups:   []string{"/sys/fs/cgroup/cpu/sriov-udn-cluster", "/sys/fs/cgroup/memory/sriov-udn-cluster"},
		Mounts:    []string{"/ (ext4 /dev/vda)", "/tmp/sriov-udn-cluster-1/varlib (none /var/lib)", "/run/netns/cni-1 (nsfs nsfs)"},
		Modules:   []string{"br_netfilter", "tun"},
		Devices:   []string{"/dev/null D|c--------- 1:3", "/dev/vfio d---------"},
		Processes: []string{"123: containerd --config /tmp/sriov-udn-cluster-1/containerd.toml"},
	}
	assert.Equal(t, []string{
		"cgroup /sys/fs/cgroup/memory/sriov-udn-cluster",
		"device /dev/vfio d---------",
		"host path /var/lib/kubelet",
		"kernel module br_netfilter",
		"mount /run/netns/cni-1 (nsfs nsfs)",
		"mount /tmp/sriov-udn-cluster-1/varlib (none /var/lib)",
		"process 123: containerd --config /tmp/sriov-udn-cluster-1/containerd.toml",
		"sysctl vm/overcommit_memory: 1, was 0",
	}, Leftovers(before, after))
	assert.Empty(t, Leftovers(before, before), "nothing changed, nothing left")
}

// The host as it is now: what the check reads of it holds every kind, and reading it twice finds nothing left.
func TestReadHostState_ReadsEveryKindOfTheHost(t *testing.T) {
	work := t.TempDir()
	s, err := ReadHostState(work)
	require.NoError(t, err)
	assert.NotEmpty(t, s.Mounts, "the host's mounts")
	assert.Contains(t, s.Devices, "/dev/null Dc---------"+" 1:3", "the host's /dev, with device numbers")
	for _, d := range s.Devices {
		assert.NotContains(t, d, "/dev/pts/", "pseudo-terminals are left out")
	}
	if _, err := os.Stat("/proc/modules"); err == nil {
		assert.NotEmpty(t, s.Modules, "the kernel's loaded modules")
	} else {
		assert.Empty(t, s.Modules, "a kernel without module support has none")
	}
	again, err := ReadHostState(work)
	require.NoError(t, err)
	assert.Empty(t, Leftovers(s, again))
}

func TestDeviceNodes_ANewNodeIsALeftover(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "pts"), 0o755))
	before, err := deviceNodes(root)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "pts", "7"), nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "vfio"), 0o755))
	after, err := deviceNodes(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"device " + filepath.Join(root, "vfio") + " d---------"},
		Leftovers(HostState{Devices: before}, HostState{Devices: after}))
}

func TestUnderAny_OtherSuitesBuildDirsOnly(t *testing.T) {
	dirs := []string{"/var/cache/x/guest", "/var/cache/x/tools/"}
	assert.True(t, underAny("/var/cache/x/guest/abc.build-1/rootfs/proc", dirs))
	assert.True(t, underAny("/var/cache/x/tools/root-1/sys", dirs))
	assert.False(t, underAny("/var/cache/x/guest2/proc", dirs), "a sibling with the same prefix")
	assert.False(t, underAny("/var/cache/x/cluster/root/proc", dirs), "the cluster's own cache stays checked")
}

func TestOtherSuitesNetns_OnlyTheNodesPodNamespacesChecked(t *testing.T) {
	assert.True(t, otherSuitesNetns("/run/netns"), "iproute2's directory")
	assert.True(t, otherSuitesNetns("/run/netns/sriovudn-123-two"), "test/guest's VF peer")
	assert.False(t, otherSuitesNetns("/run/netns/cni-5f1c2e1a-0c1d-4f6e-9a43-2b7d9b0a1e55"), "a pod's, containerd's name")
	assert.False(t, otherSuitesNetns("/var/run/netns/cni-1"), "a pod's, by the other path")
	assert.False(t, otherSuitesNetns("/run/netnsx/a"))
}
