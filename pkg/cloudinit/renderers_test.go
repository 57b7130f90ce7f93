package cloudinit

import (
	"bytes"
	"encoding/json"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// The renderers below exist for tests only: production renders through the merges (MergeNoCloud
// writes v2 entries with v2EthernetOf only when the user's own networkData is v2, and
// MergeNetworkDataJSON with no user data is the plain network_data.json).

// renderNetworkConfigV2 renders NoCloud network-config version 2 for ifaces, as JSON (which is YAML); used only when the user's
// own networkData is v2, because cloud-init never mixes versions in one document.
func renderNetworkConfigV2(ifaces []model.BoundInterface) ([]byte, error) {
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, err
	}
	var ethernets orderedEthernets
	for i := range plans {
		entry, err := v2EthernetOf(&plans[i])
		if err != nil {
			return nil, err
		}
		ethernets.names = append(ethernets.names, plans[i].name)
		ethernets.entries = append(ethernets.entries, entry)
	}
	return marshalJSON(struct {
		Version   int              `json:"version"`
		Ethernets orderedEthernets `json:"ethernets"`
	}{2, ethernets}, true)
}

// orderedEthernets is v2 ethernets in the plans' order, the order the merge adds them to the user's.
type orderedEthernets struct {
	names   []string
	entries []v2Ethernet
}

func (o orderedEthernets) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range o.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		v, err := json.Marshal(o.entries[i])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// renderNetworkDataJSON renders OpenStack network_data.json (ConfigDrive) for ifaces alone.
func renderNetworkDataJSON(ifaces []model.BoundInterface) ([]byte, error) {
	return MergeNetworkDataJSON(nil, ifaces)
}
