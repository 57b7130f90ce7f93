package model

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// defaultPodNetworksKey is the k8s.ovn.org/pod-networks key of the cluster default network.
const defaultPodNetworksKey = "default"

func (f Family) String() string {
	if f != IPv4 && f != IPv6 {
		return "unknown"
	}
	return fmt.Sprintf("IPv%d", int(f))
}

// FamilyOf returns the family of a valid address (IPv4-mapped IPv6 counts as IPv4).
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// PrimaryFamily is the pod's primary IP family (docs/design.md section 2): the family of podIP (env
// MY_POD_IP) when it parses, else of the first "default" address in pod-networks, else IPv4.
func PrimaryFamily(snap *downwardapi.Snapshot, podIP string) Family {
	if a, err := netval.ParseAddr(strings.TrimSpace(podIP)); err == nil {
		return FamilyOf(a)
	}
	if snap != nil {
		for _, p := range snap.PodNetworks[defaultPodNetworksKey].IPAddresses {
			if p.IsValid() {
				return FamilyOf(p.Addr())
			}
		}
	}
	return IPv4
}

// sortByFamily orders items primary family first, keeping the relative order inside a family.
func sortByFamily[T any](items []T, primary Family, family func(T) Family) {
	rank := func(x T) int {
		if family(x) == primary {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(items, func(a, b T) int { return rank(a) - rank(b) })
}
