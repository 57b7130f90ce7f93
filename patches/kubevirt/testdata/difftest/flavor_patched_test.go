//go:build sriovudn_patched

package network_test

import (
	"path/filepath"
	"testing"

	"kubevirt.io/kubevirt/pkg/network/cache"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	kfs "kubevirt.io/kubevirt/pkg/os/fs"
	virtcache "kubevirt.io/kubevirt/pkg/virt-handler/cache"
	cmdclient "kubevirt.io/kubevirt/pkg/virt-handler/cmd-client"
)

const netStatFlavor = "patched"

// emptyCacheCreator roots virt-handler's own pod interface cache in an empty directory: a VF has no
// entry there.
type emptyCacheCreator struct{ dir string }

func (c emptyCacheCreator) New(path string) *cache.Cache {
	return cache.NewCustomCache(filepath.Join(c.dir, path), kfs.New())
}

// newNetStatUnderTest is the patched virt-handler's NetStat as cmd/virt-handler builds it, with the host
// root "/" and the test's kubelet pods directory, and a ghost record of the launcher pod.
func newNetStatUnderTest(t *testing.T, l podLayout) *netsetup.NetStat {
	t.Helper()
	ghostRecords := virtcache.InitializeGhostRecordCache(virtcache.NewIterableCheckpointManager(t.TempDir()))
	if err := ghostRecords.Add("tenant-a", "vm-sriov", cmdclient.SocketFilePathOnHost(diffPodUID), diffVMIUID); err != nil {
		t.Fatal(err)
	}
	return netsetup.NewNetStatWithBindingPluginCache(emptyCacheCreator{dir: t.TempDir()},
		netsetup.NewBindingPluginCacheReader("/", l.kubeletPodsDir, ghostRecords))
}
