package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLeftovers_NamesEveryKindOfChange(t *testing.T) {
	before := HostState{
		Sysctls: map[string]string{"vm/overcommit_memory": "0", "kernel/panic": "1"},
		Paths:   map[string]bool{"/etc/cni/net.d": true},
		Cgroups: []string{"/sys/fs/cgroup/cpu/sriov-udn-cluster"},
	}
	after := HostState{
		Sysctls:   map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "1"},
		Paths:     map[string]bool{"/etc/cni/net.d": true, "/var/lib/kubelet": true},
		Cgroups:   []string{"/sys/fs/cgroup/cpu/sriov-udn-cluster", "/sys/fs/cgroup/memory/sriov-udn-cluster"},
		Mounts:    []string{"/tmp/sriov-udn-cluster-1/varlib"},
		Processes: []string{"123: containerd --config /tmp/sriov-udn-cluster-1/containerd.toml"},
	}
	assert.Equal(t, []string{
		"cgroup /sys/fs/cgroup/memory/sriov-udn-cluster",
		"host path /var/lib/kubelet",
		"mount /tmp/sriov-udn-cluster-1/varlib",
		"process 123: containerd --config /tmp/sriov-udn-cluster-1/containerd.toml",
		"sysctl vm/overcommit_memory: 1, was 0",
	}, Leftovers(before, after))
	assert.Empty(t, Leftovers(before, before), "nothing changed, nothing left")
}
