//go:build sriovudn_patched

package network_test

import (
	"path/filepath"
	"testing"

	"kubevirt.io/kubevirt/pkg/network/cache"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	kfs "kubevirt.io/kubevirt/pkg/os/fs"
)

const netStatFlavor = "patched"

// emptyCacheCreator roots virt-handler's own pod interface cache in an empty directory: a VF has no
// entry there.
type emptyCacheCreator struct{ dir string }

func (c emptyCacheCreator) New(path string) *cache.Cache {
	return cache.NewCustomCache(filepath.Join(c.dir, path), kfs.New())
}

func newNetStatUnderTest(t *testing.T, l podLayout) *netsetup.NetStat {
	return netsetup.NewNetStatWithBindingPluginCache(emptyCacheCreator{dir: t.TempDir()}, netsetup.NewBindingPluginCacheReader(l.podsDir))
}
