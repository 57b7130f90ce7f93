package ovn

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// PodNetworksAnnotation is the pod annotation ovnkube-controller writes.
const PodNetworksAnnotation = "k8s.ovn.org/pod-networks"

// PodNetworks is the annotation's value: "default" for the cluster network, "<ns>/<nad>" for each user-defined
// network.
type PodNetworks map[string]PodNetwork

// PodNetwork is one entry, OVN-K's podAnnotation field for field and tag for tag
// (ovn-org/ovn-kubernetes go-controller/pkg/util/pod_annotation.go): ip_addresses and mac_address are always
// present (null when unset), ip_address/gateway_ip only on single-stack networks.
type PodNetwork struct {
	IPAddresses []string   `json:"ip_addresses"`
	MACAddress  string     `json:"mac_address"`
	GatewayIPs  []string   `json:"gateway_ips,omitempty"`
	Routes      []PodRoute `json:"routes,omitempty"`
	IPAddress   string     `json:"ip_address,omitempty"`
	GatewayIP   string     `json:"gateway_ip,omitempty"`
	TunnelID    int        `json:"tunnel_id,omitempty"`
	Role        string     `json:"role,omitempty"`
	IPAMMode    string     `json:"ipam_mode,omitempty"`
}

// PodRoute is one entry of a PodNetwork's routes.
type PodRoute struct {
	Dest    string `json:"dest"`
	NextHop string `json:"nextHop"`
}

// Decode decodes the annotation's value.
func Decode(value string) (PodNetworks, error) {
	var out PodNetworks
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", PodNetworksAnnotation, err)
	}
	return out, nil
}

// Prefixes parses IPAddresses (CIDR, OVN-K's form).
func (n PodNetwork) Prefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range n.IPAddresses {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("ip_addresses: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}
