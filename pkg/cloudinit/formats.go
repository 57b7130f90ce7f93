package cloudinit

import (
	"bytes"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// format is what one KubeVirt DataSource makes of the network config: how the user's networkData is
// read, how ours is written alone, and whether cloudbase-init's script (windows.go) can ride along.
type format struct {
	// parse reads the user's networkData (not blank) within the limits; nil, nil when it configures nothing.
	parse func(user []byte) (userNetwork, error)
	alone func(plans []nicPlan) ([]byte, error) // ours when the user gave no networkData
	// windowsScript: cloudbase-init reads this DataSource (it reads ConfigDrive only).
	windowsScript bool
}

// formats holds one format per DataSource value of KubeVirt's cloudinit.DataSourceType
// (pkg/cloud-init/cloud-init.go); a new datasource is one entry here.
var formats = map[string]format{
	dataSourceNoCloud:     {parse: parseNoCloud, alone: renderV1},
	dataSourceConfigDrive: {parse: parseNetworkDataJSON, alone: renderConfigDrive, windowsScript: true},
}

// userNetwork is the user's networkData of one format, parsed once per call.
type userNetwork interface {
	// keys are the MACs and names of the NICs the user configures: theirs win over ours.
	keys() (macs, names []string)
	// merge adds ours (UserNetwork.split) and writes the result; once: it may change the document.
	merge(plans []nicPlan) ([]byte, error)
}

// Plans is our guest config of each NIC, validated once per call (planNICs) and read by every writer.
type Plans struct {
	dataSource string
	format     format
	plans      []nicPlan
}

// UserNetwork is the user's networkData, parsed once per call; parsed is nil when there is none.
type UserNetwork struct {
	parsed userNetwork
}

// split parts plans into ours, the NICs the user's networkData does not configure, and the interfaces
// whose NIC it configures by MAC or guest name: theirs, named, where the user's entry wins.
func (u *UserNetwork) split(plans []nicPlan) (ours []nicPlan, theirs []string) {
	if u == nil || u.parsed == nil {
		return plans, nil
	}
	macs, names := u.parsed.keys()
	ours = make([]nicPlan, 0, len(plans))
	for i := range plans {
		if configuredByUser(&plans[i], macs, names) {
			theirs = append(theirs, plans[i].iface)
		} else {
			ours = append(ours, plans[i])
		}
	}
	return ours, theirs
}

// write is the network config of one format: ours (split) alone, or merged into the user's.
func (u *UserNetwork) write(f format, ours []nicPlan) ([]byte, error) {
	if u == nil || u.parsed == nil {
		return f.alone(ours)
	}
	return u.parsed.merge(ours)
}

// parseUser parses user in format f; blank configures nothing (as in WithPodNIC).
func parseUser(f format, user []byte) (*UserNetwork, error) {
	if len(bytes.TrimSpace(user)) == 0 {
		return &UserNetwork{}, nil
	}
	parsed, err := f.parse(user)
	if err != nil {
		return nil, err
	}
	return &UserNetwork{parsed: parsed}, nil
}

// mergeOnce plans ifaces, parses user and merges them (MergeNoCloud, MergeNetworkDataJSON).
func mergeOnce(f format, user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, err
	}
	u, err := parseUser(f, user)
	if err != nil {
		return nil, err
	}
	ours, _ := u.split(plans)
	return u.write(f, ours)
}
