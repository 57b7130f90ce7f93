package cloudinit

import (
	"bytes"
	"fmt"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// MergeNoCloud merges our config for ifaces into the user's NoCloud network-config. It keeps the user's
// version (v1 or v2: cloud-init reads one version per document) and their optional top-level "network:"
// wrapper (stages.py _remove_top_level_network_key); with no user data it renders v1. A user entry that
// configures one of our NICs (same MAC, case-insensitive, or same name) wins and ours for that NIC is left
// out; everything of theirs is re-emitted from the parsed document, unknown keys and comments included.
func MergeNoCloud(user []byte, ifaces []model.BoundInterface) ([]byte, error) {
	if len(bytes.TrimSpace(user)) == 0 {
		// No user networkData (the usual case; a YAML parser costs more than the render). Blank
		// counts as none, as in WithFallback: whitespace alone configures nothing.
		return RenderNetworkConfigV1(ifaces)
	}
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, err
	}
	if err := checkYAMLSize(user); err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	doc, err := decodeYAML(user)
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	if doc == nil {
		return RenderNetworkConfigV1(ifaces)
	}
	if err := checkYAMLTree(doc); err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	mb := newMergeBudget()
	lookup := mb.lookup
	body := resolve(doc.Content[0])
	if body.Kind == yaml.ScalarNode && body.Tag == "!!null" {
		return RenderNetworkConfigV1(ifaces)
	}
	if body.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("noCloud networkData: top level is not a mapping")
	}
	if wrapped := lookup(body, "network"); wrapped != nil {
		body = resolve(wrapped)
		if body == nil || body.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("noCloud networkData: \"network\" is not a mapping")
		}
	}
	if v, ok := scalar(lookup(body, "config")); ok && v == "disabled" {
		return nil, fmt.Errorf("noCloud networkData disables networking (config: disabled): cannot add the interfaces bound to this plugin")
	}
	vn := resolve(lookup(body, "version"))
	if vn == nil || vn.Kind != yaml.ScalarNode || vn.ShortTag() != "!!int" || (vn.Value != "1" && vn.Value != "2") {
		got := "none"
		if v, ok := scalar(vn); ok {
			got = fmt.Sprintf("%q", v)
		}
		return nil, fmt.Errorf("noCloud networkData: version must be 1 or 2, got %s", got)
	}
	if vn.Value == "1" {
		err = mergeV1(body, plans, mb)
	} else {
		err = mergeV2(body, plans, mb)
	}
	if err == nil && mb.exceeded() {
		err = fmt.Errorf("YAML merge keys (<<) make the merge visit more than %d mappings", MaxMergeExpansion)
	}
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	out, err := encodeYAML(doc)
	if err != nil {
		return nil, fmt.Errorf("noCloud networkData: %w", err)
	}
	return out, nil
}

// collection returns the list or mapping under key in mapping m, creating it (or replacing a null) when absent.
func collection(m *yaml.Node, key string, kind yaml.Kind, tag string, mb *mergeBudget) (*yaml.Node, error) {
	n := resolve(mb.lookup(m, key))
	switch {
	case n == nil:
		n = &yaml.Node{Kind: kind, Tag: tag}
		set(m, key, n)
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		n.Kind, n.Tag, n.Value, n.Style = kind, tag, "", 0
	case n.Kind != kind:
		return nil, fmt.Errorf("%q is not a %s", key, map[yaml.Kind]string{yaml.SequenceNode: "list", yaml.MappingNode: "mapping"}[kind])
	}
	return n, nil
}

func mergeV1(body *yaml.Node, plans []nicPlan, mb *mergeBudget) error {
	config, err := collection(body, "config", yaml.SequenceNode, "!!seq", mb)
	if err != nil {
		return err
	}
	macs, names := userNICsV1(config, mb.lookup)
	for i := range plans {
		if !configuredByUser(&plans[i], macs, names) {
			config.Content = append(config.Content, v1Physical(&plans[i]))
		}
	}
	return nil
}

// mergeV2 treats every mapping-valued top-level key (ethernets, bonds, vlans, bridges, ...) as a map of
// interface IDs: netplan IDs share one namespace, so an ID equal to our name is a clash too.
func mergeV2(body *yaml.Node, plans []nicPlan, mb *mergeBudget) error {
	macs, names := userNICsV2(body, mb.lookup)
	ethernets, err := collection(body, "ethernets", yaml.MappingNode, "!!map", mb)
	if err != nil {
		return err
	}
	for i := range plans {
		if configuredByUser(&plans[i], macs, names) {
			continue
		}
		entry, err := v2Ethernet(&plans[i])
		if err != nil {
			return err
		}
		setQuotedKey(ethernets, plans[i].name, entry)
	}
	return nil
}

// lookupFunc is lookup, or a mergeBudget's lookup that shares one budget across a document.
type lookupFunc func(m *yaml.Node, key string) *yaml.Node

// userNICsV1 returns the MACs and names the entries of a v1 "config" list configure.
func userNICsV1(config *yaml.Node, lookup lookupFunc) (macs, names []string) {
	for _, item := range config.Content {
		if mac, ok := scalar(lookup(item, "mac_address")); ok {
			macs = append(macs, mac)
		}
		if name, ok := scalar(lookup(item, "name")); ok {
			names = append(names, name)
		}
	}
	return macs, names
}

// userNICsV2 returns the MACs and names (IDs, set-name, match.name) every mapping-valued top-level
// section of a v2 body configures.
func userNICsV2(body *yaml.Node, lookup lookupFunc) (macs, names []string) {
	for i := 0; i+1 < len(body.Content); i += 2 {
		section := resolve(body.Content[i+1])
		if section == nil || section.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(section.Content); j += 2 {
			if id, ok := scalar(section.Content[j]); ok {
				names = append(names, id)
			}
			entry := section.Content[j+1]
			if name, ok := scalar(lookup(entry, "set-name")); ok {
				names = append(names, name)
			}
			match := lookup(entry, "match")
			if mac, ok := scalar(lookup(match, "macaddress")); ok {
				macs = append(macs, mac)
			}
			if name, ok := scalar(lookup(match, "name")); ok {
				names = append(names, name)
			}
		}
	}
	return macs, names
}
