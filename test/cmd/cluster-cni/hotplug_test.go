package main

import (
	"context"
	"encoding/json"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

const hotNetwork = "hot1" // the VMI network name of the hot-plugged bridge NIC

// addSelection appends a network to the pod's networks annotation, as virt-controller does for a hot-plugged NIC.
func (f *fixture) addSelection(t *testing.T, sel nadv1.NetworkSelectionElement) {
	t.Helper()
	pod, err := f.cluster.Pod(context.Background(), "ns1", "virt-launcher-vm1-x")
	require.NoError(t, err)
	var sels []nadv1.NetworkSelectionElement
	require.NoError(t, json.Unmarshal([]byte(pod.Annotations[NetworksAnnotation]), &sels))
	b, err := json.Marshal(append(sels, sel))
	require.NoError(t, err)
	require.NoError(t, f.cluster.PatchPodAnnotations(context.Background(), "ns1", "virt-launcher-vm1-x", map[string]string{NetworksAnnotation: string(b)}))
}

func (f *fixture) hotplug(t *testing.T) ([]string, error) {
	t.Helper()
	var added []string
	var err error
	pod, perr := f.cluster.Pod(context.Background(), "ns1", "virt-launcher-vm1-x")
	require.NoError(t, perr)
	inNetns(t, f.hostNS, func() { added, err = Hotplug(context.Background(), f.conf, f.cluster, pod) })
	return added, err
}

// A bridge network added to a running pod's networks annotation: the veth appears in the pod's netns under the
// name the annotation asks for, on the NAD's bridge, and network-status gains its entry (the earlier entries
// kept); a second pass changes nothing; DEL removes the veth with the rest.
func TestHotplug_BridgeNetworkAddedToARunningPod(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	f.cluster.addNAD("ns1", "hotbr", `{"cniVersion":"1.0.0","name":"hotbr","type":"bridge","bridge":"ccnihot0","mtu":1450}`)
	added, err := f.hotplug(t)
	require.NoError(t, err)
	assert.Empty(t, added, "nothing before ADD published network-status")

	_, err = f.do(t, "ADD", nil)
	require.NoError(t, err)
	added, err = f.hotplug(t)
	require.NoError(t, err)
	assert.Empty(t, added, "every network of the annotation is published already")
	patches := f.cluster.patches

	iface := hashedPodIfaceName(hotNetwork)
	f.addSelection(t, nadv1.NetworkSelectionElement{Name: "hotbr", Namespace: "ns1", InterfaceRequest: iface, MacRequest: "02:00:00:00:0a:01"})
	added, err = f.hotplug(t)
	require.NoError(t, err)
	assert.Equal(t, []string{iface}, added)
	assert.Equal(t, patches+2, f.cluster.patches, "the selection's patch and one of network-status")

	ls := links(t, f.podNS)
	require.Contains(t, ls, iface, "the pod's link, named as the annotation asks")
	veth, ok := ls[iface].(*netlink.Veth)
	require.True(t, ok, "%s is a %s", iface, ls[iface].Type())
	assert.Equal(t, 1450, veth.Attrs().MTU)
	assert.Len(t, globalAddrs(t, f.podNS, iface), 0, "layer 2 only")
	bridgeUp := false
	inNetns(t, f.hostNS, func() {
		br, err := netlink.LinkByName("ccnihot0")
		bridgeUp = err == nil && br.Type() == "bridge"
	})
	assert.True(t, bridgeUp, "the NAD's bridge on the node")

	pod, err := f.cluster.Pod(context.Background(), "ns1", "virt-launcher-vm1-x")
	require.NoError(t, err)
	snap := downwardapi.SnapshotFromMaps(pod.Labels, pod.Annotations)
	require.Empty(t, snap.Problems)
	require.Len(t, snap.NetworkStatus, 3, "the cluster network, the UDN and the hot-plugged network")
	assert.Equal(t, "ns2/l2net", snap.NetworkStatus[1].Name, "the earlier entries kept")
	hot := snap.NetworkStatus[2]
	assert.Equal(t, "ns1/hotbr", hot.Name)
	assert.Equal(t, iface, hot.Interface)
	assert.Equal(t, veth.Attrs().HardwareAddr.String(), hot.Mac)
	assert.Equal(t, 1450, hot.Mtu)

	added, err = f.hotplug(t)
	require.NoError(t, err)
	assert.Empty(t, added, "a second pass finds it published")
	assert.Equal(t, patches+2, f.cluster.patches)

	_, err = f.do(t, "DEL", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, keys(links(t, f.podNS)), "DEL removes the hot-plugged veth too")
}

// Only bridge networks can be hot-plugged: a sriov one added later is refused, naming the pod and network.
func TestHotplug_SRIOVNetworkRefused(t *testing.T) {
	f := newFixture(t, dualStackIPAM)
	_, err := f.do(t, "ADD", nil)
	require.NoError(t, err)
	f.cluster.addNAD("ns1", "vf2", `{"cniVersion":"1.0.0","name":"vf2","type":"sriov","deviceID":"0000:65:00.3"}`)
	f.addSelection(t, nadv1.NetworkSelectionElement{Name: "vf2", Namespace: "ns1", InterfaceRequest: hashedPodIfaceName("vf2")})
	_, err = f.hotplug(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod ns1/virt-launcher-vm1-x: network ns1/vf2 is sriov: only bridge networks can be hot-plugged here")
	_, err = f.do(t, "DEL", nil)
	require.NoError(t, err)
}
