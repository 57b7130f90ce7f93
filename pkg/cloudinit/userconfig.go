package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// UserConfigured returns the names of the ifaces that the user's networkData already configures (same
// MAC or same guest name): for those the merge keeps the user's entry and leaves ours out, which the
// caller reports so that nobody reads our addresses as the guest's. dataSource is KubeVirt's
// CloudInitData DataSource ("noCloud" or "configDrive"). Input the merge would reject is not reported
// here: the merge names it.
func UserConfigured(dataSource string, user []byte, ifaces []model.BoundInterface) []string {
	if len(bytes.TrimSpace(user)) == 0 || len(ifaces) == 0 {
		return nil
	}
	var macs, names []string
	switch dataSource {
	case dataSourceNoCloud:
		if checkYAMLSize(user) != nil {
			return nil
		}
		doc, err := decodeYAML(user)
		if err != nil || doc == nil || checkYAMLTree(doc) != nil {
			return nil
		}
		mb := newMergeBudget()
		lookup := mb.lookup
		body := resolve(doc.Content[0])
		if body == nil || body.Kind != yaml.MappingNode {
			return nil
		}
		if wrapped := lookup(body, "network"); wrapped != nil {
			if body = resolve(wrapped); body == nil || body.Kind != yaml.MappingNode {
				return nil
			}
		}
		switch v, _ := scalar(resolve(lookup(body, "version"))); v {
		case "1":
			if config := resolve(lookup(body, "config")); config != nil && config.Kind == yaml.SequenceNode {
				macs, names = userNICsV1(config, lookup)
			}
		case "2":
			macs, names = userNICsV2(body, lookup)
		}
	case dataSourceConfigDrive:
		var err error
		if macs, names, err = userLinkKeys(user); err != nil {
			return nil
		}
	}
	if len(macs)+len(names) == 0 {
		return nil
	}
	var out []string
	for i := range ifaces {
		p, err := planNIC(&ifaces[i])
		if err != nil {
			continue
		}
		if configuredByUser(&p, macs, names) {
			out = append(out, ifaces[i].Name)
		}
	}
	return out
}

// NetworkData returns the DataSource and the user's NetworkData of a CloudInitData JSON object as
// KubeVirt sends it (Go field names, matched case-insensitively as encoding/json does).
func NetworkData(cloudInitData []byte) (dataSource string, networkData []byte, err error) {
	var d struct {
		DataSource  string
		NetworkData string
	}
	if err := json.Unmarshal(cloudInitData, &d); err != nil {
		return "", nil, fmt.Errorf("cloudInitData: %w", err)
	}
	return d.DataSource, []byte(d.NetworkData), nil
}
