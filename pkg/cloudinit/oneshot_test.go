package cloudinit

import (
	"encoding/json"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// One-shot forms of the steps Input.Plan, Input.ParseNetworkData and Input.Merge run once per call, for
// the tests of one writer at a time.

// MergeNoCloud merges our config for ifaces into the user's NoCloud network-config. It keeps the user's
// version (v1 or v2: cloud-init reads one version per document) and their optional top-level "network:"
// wrapper (stages.py _remove_top_level_network_key); with no user data it renders v1. A user entry that
// configures one of our NICs (same MAC, case-insensitive, or same name) wins and ours for that NIC is left
// out; everything of theirs is re-emitted from the parsed document, unknown keys and comments included.
func MergeNoCloud(user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	return mergeOnce(formats[dataSourceNoCloud], user, ifaces)
}

// MergeNetworkDataJSON adds our links and networks to the user's network_data.json, before theirs (see
// oursFirst). A user link that configures one of our NICs (same ethernet_mac_address, case-insensitive,
// or same name) wins: ours for that NIC is left out. Everything of theirs is kept as it was, in their
// order, unknown keys included: their data is handled as raw JSON values and only read, never re-typed.
func MergeNetworkDataJSON(user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	return mergeOnce(formats[dataSourceConfigDrive], user, ifaces)
}

// WindowsNetworkScript returns the cloudbase-init "#ps1_sysnative" PowerShell script that applies, on the
// guest's adapters (found by MAC), what network_data.json cannot carry to cloudbase-init for ifaces.
// userNetworkData is the user's network_data.json (may be empty), as given to MergeNetworkDataJSON: a NIC
// the user configures there is theirs, and the script leaves it alone too. It returns "" when there is
// nothing to apply. It is pure.
func WindowsNetworkScript(userNetworkData []byte, ifaces []model.BoundInterface) (string, error) {
	plans, err := planNICs(ifaces)
	if err != nil {
		return "", err
	}
	user, err := parseUser(formats[dataSourceConfigDrive], userNetworkData)
	if err != nil {
		return "", err
	}
	macs, names := user.keys()
	return windowsNetworkScript(plans, macs, names)
}

// mergeOnce plans ifaces, parses user and merges them: the whole network config of one format for
// the callers that have nothing else to do with the plans or the parse (MergeNoCloud,
// MergeNetworkDataJSON).
func mergeOnce(f format, user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, err
	}
	u, err := parseUser(f, user)
	if err != nil {
		return nil, err
	}
	return u.write(f, plans)
}

// UserConfigured is Result.UserConfigured for the user's networkData of dataSource, through the steps
// of one call; nil when the merge fails (it names the input).
func UserConfigured(dataSource string, user []byte, ifaces []model.BoundInterface) []string {
	data, err := json.Marshal(map[string]string{"DataSource": dataSource, "NetworkData": string(user), "UserData": minimalUserData})
	if err != nil {
		return nil
	}
	in, err := DecodeInput(data)
	if err != nil {
		return nil
	}
	plans, err := in.Plan(ifaces)
	if err != nil {
		return nil
	}
	u, err := in.ParseNetworkData()
	if err != nil {
		return nil
	}
	res, err := in.Merge(ApplyOptions{}, plans, u)
	if err != nil {
		return nil
	}
	return res.UserConfigured
}
