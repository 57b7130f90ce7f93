package cloudinit

import (
	"encoding/json"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// One-shot forms of what Input.Merge does once per call, for the tests of one writer at a time.

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
	ours, _ := user.split(plans)
	return windowsNetworkScript(ours)
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
