package cloudinit

import "github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"

// The renderers below exist for tests only: production renders through the merges (MergeNoCloud
// writes v2 entries with v2Ethernet only when the user's own networkData is v2, and
// MergeNetworkDataJSON with no user data is the plain network_data.json).

// renderNetworkConfigV2 renders NoCloud network-config version 2 for ifaces, as JSON (which is YAML); used only when the user's
// own networkData is v2, because cloud-init never mixes versions in one document.
func renderNetworkConfigV2(ifaces []model.BoundInterface) ([]byte, error) {
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, err
	}
	ethernets := mapNode()
	for i := range plans {
		entry, err := v2Ethernet(&plans[i])
		if err != nil {
			return nil, err
		}
		setQuotedKey(ethernets, plans[i].name, entry)
	}
	root := mapNode()
	set(root, "version", intNode(2))
	set(root, "ethernets", ethernets)
	return nodeJSON(root)
}

// renderNetworkDataJSON renders OpenStack network_data.json (ConfigDrive) for ifaces alone.
func renderNetworkDataJSON(ifaces []model.BoundInterface) ([]byte, error) {
	return MergeNetworkDataJSON(nil, ifaces)
}
