//go:build sriovudn_stock

package network_test

import (
	"path/filepath"
	"testing"

	"kubevirt.io/kubevirt/pkg/network/cache"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	kfs "kubevirt.io/kubevirt/pkg/os/fs"
	"kubevirt.io/kubevirt/pkg/util"
)

const netStatFlavor = "stock"

// rootedCacheCreator roots stock NetStat's cache reader at the sidecar's directory: the most a stock
// virt-handler could be configured to do (pkg/ifacecache doc.go).
type rootedCacheCreator struct{ dir string }

func (c rootedCacheCreator) New(path string) *cache.Cache {
	rel, err := filepath.Rel(filepath.Join(util.VirtPrivateDir, "network-info-cache"), path)
	if err != nil {
		panic(err)
	}
	return cache.NewCustomCache(filepath.Join(c.dir, rel), kfs.New())
}

func newNetStatUnderTest(_ *testing.T, l podLayout) *netsetup.NetStat {
	return netsetup.NewNetStateWithCustomFactory(rootedCacheCreator{dir: l.sidecarDir})
}
