//go:build sriovudn_stock

package network_test

import (
	"os"
	"path/filepath"
	"testing"

	netsetup "kubevirt.io/kubevirt/pkg/network/setup"
	"kubevirt.io/kubevirt/pkg/util"
)

const netStatFlavor = "stock"

// newNetStatUnderTest is stock virt-handler's NetStat: its own pod interface cache reader on its own path
// (<virt private dir>/network-info-cache/<vmi uid>/<iface>), where virt-handler writes entries only for
// interfaces that have a pod interface, which a VF never has. Stock reads nothing of the sidecar's.
func newNetStatUnderTest(t *testing.T, _ podLayout) *netsetup.NetStat {
	t.Helper()
	stockEntries := filepath.Join(util.VirtPrivateDir, "network-info-cache", diffVMIUID)
	if _, err := os.Stat(stockEntries); !os.IsNotExist(err) {
		t.Fatalf("%s must not exist on this machine (virt-handler never writes it for a VF): %v", stockEntries, err)
	}
	return netsetup.NewNetStat()
}
