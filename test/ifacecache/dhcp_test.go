package ifacecache_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/network/cache"
	"kubevirt.io/kubevirt/pkg/network/namescheme"
	netsetup "kubevirt.io/kubevirt/pkg/network/setup"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kubevirtjson"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// dhcpAnnotations is the launcher pod's pod-networks (and network-status, which Multus writes from the CNI
// result) for vmiWithVF's network ns1/udn in OKEP-6224 DHCP mode, with lease "" before ovnkube-node
// reported one: ovnkube-controller writes the entry MAC-only, ovnkube-node patches in the lease its one-shot
// DHCP discovered at CNI ADD, and a sandbox recreated before the pod runs takes a new one (ovn-kubernetes
// #6666 pkg/util/pod_annotation.go: a DHCP entry's IPs may be overwritten).
func dhcpAnnotations(t *testing.T, lease string) map[string]string {
	t.Helper()
	entry := ovn.PodNetwork{MACAddress: vfMAC, Role: "secondary", IPAMMode: "dhcp"}
	status := []map[string]any{{"name": "ovn-kubernetes", "interface": "eth0", "ips": []string{"10.244.1.12"}, "default": true}}
	if lease != "" {
		entry.IPAddresses, entry.GatewayIPs = []string{lease + "/24"}, []string{"10.1.192.1"}
		status = append(status, map[string]any{"name": "ns1/udn", "interface": namescheme.GenerateHashedInterfaceName("net1"), "ips": []string{lease}, "mac": vfMAC})
	}
	podNetworks, err := json.Marshal(ovn.PodNetworks{"ns1/udn": entry})
	require.NoError(t, err)
	networkStatus, err := json.Marshal(status)
	require.NoError(t, err)
	return map[string]string{downwardapi.PodNetworksAnnotation: string(podNetworks), downwardapi.NetworkStatusAnnotation: string(networkStatus)}
}

// TestDHCPMode_LeaseArrivesThenChanges_EntryRewritten_KubeVirtsReaderFollows_StockNetStatKeepsItsFirstRead
// drives what the sidecar's cache refresher runs on each pod-info change (model.Build on the snapshot, then
// Writer.Sync) through the DHCP lease's life: no entry while the pod-networks entry is MAC-only (DHCP set,
// nothing to report), an entry once the lease arrives, the entry rewritten with a new lease. KubeVirt's own
// cache reader (pkg/network/cache ReadPodInterfaceCache, which patch 0002's reader also parses with) reads
// each version; stock NetStat, rooted on our directory, keeps the first read it made (v1.9.0 netstat.go
// getPodInterfacefromFileCache memoises it) and never shows the new lease: the gap 0002 closes by reading the
// entry on every update (patches/kubevirt difftest "DHCP mode: ... re-read" runs the patched NetStat on it).
func TestDHCPMode_LeaseArrivesThenChanges_EntryRewritten_KubeVirtsReaderFollows_StockNetStatKeepsItsFirstRead(t *testing.T) {
	dir := t.TempDir()
	w := ifacecache.NewWriter(dir, nil)
	vmi := vmiWithVF()
	modelVMI := &model.VirtualMachineInstance{}
	raw, err := json.Marshal(vmi)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, modelVMI))
	creator := rootedCacheCreator{dir}
	stock := netsetup.NewNetStateWithCustomFactory(creator)

	steps := []struct {
		name, lease string
		wantWritten []string
		wantEntry   []string // what KubeVirt's reader returns; nil: no entry
		wantStock   string   // the IP stock NetStat reports
	}{
		{"pod-networks entry MAC-only, no lease yet", "", nil, nil, ""},
		{"the lease arrives (CNI ADD)", "10.1.192.213", []string{"net1"}, []string{"10.1.192.213"}, ""},
		{"a new lease after a sandbox recreation", "10.1.192.99", []string{"net1"}, []string{"10.1.192.99"}, ""},
		{"the same lease again (annotations rewritten, nothing changed)", "10.1.192.99", nil, []string{"10.1.192.99"}, ""},
	}
	for i, step := range steps {
		snap := downwardapi.SnapshotFromMaps(nil, dhcpAnnotations(t, step.lease))
		bound, err := model.Build(modelVMI, snap, model.Options{BindingName: "sriov-udn"})
		require.NoError(t, err, step.name)
		require.Len(t, bound, 1)
		require.True(t, bound[0].DHCP, "%s: ipam_mode dhcp", step.name)
		res, err := w.Sync(vmiUID, kubevirtjson.Interfaces(t, specIface()), bound, model.IPv4)
		require.NoError(t, err, step.name)
		assert.Equal(t, step.wantWritten, res.Written, "%s: entries written", step.name)

		got, err := cache.ReadPodInterfaceCache(creator, vmiUID, "net1")
		if step.wantEntry == nil {
			require.Error(t, err, "%s: no entry yet", step.name)
		} else {
			require.NoError(t, err, step.name)
			assert.Equal(t, step.wantEntry, got.PodIPs, "%s: KubeVirt's reader", step.name)
		}

		require.NoError(t, stock.UpdateStatus(vmi, domainWithVF(t)), step.name)
		assert.Equal(t, step.wantStock, vmi.Status.Interfaces[0].IP, "%s: stock NetStat (first read kept)", step.name)

		// A NetStat that has not read the entry before (what 0002's reader amounts to on each update) sees
		// the entry of this step.
		fresh := vmiWithVF()
		require.NoError(t, netsetup.NewNetStateWithCustomFactory(creator).UpdateStatus(fresh, domainWithVF(t)), step.name)
		want := ""
		if step.wantEntry != nil {
			want = step.wantEntry[0]
		}
		assert.Equal(t, want, fresh.Status.Interfaces[0].IP, "step %d %s: a first read", i, step.name)
	}
}
