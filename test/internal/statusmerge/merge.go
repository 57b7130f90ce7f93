package statusmerge

import (
	"net/netip"
	"slices"
	"strings"

	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Info sources as KubeVirt names them (pkg/network/vmispec/infosource.go).
const (
	infoSourceGuestAgent  = "guest-agent"
	infoSourceDomainAndGA = "domain, guest-agent"
)

// guestOnlyInterfaceLimit caps the guest-agent interfaces that match no VMI interface, as
// KubeVirt does (pkg/network/setup/netstat.go ifacesStatusFromGuestAgent).
const guestOnlyInterfaceLimit = 10

// StatusInputs is what virt-handler has when it computes vmi.status.interfaces
// (pkg/network/setup/netstat.go NetStat.UpdateStatus).
type StatusInputs struct {
	// Domain is the status KubeVirt derives from the domain spec, before any IP is added
	// (ifacesStatusFromDomainInterfaces + sriovIfacesStatusFromDomainHostDevices): Name, MAC,
	// InfoSource, QueueCount, LinkState. Its order is kept.
	Domain []kvv1.VirtualMachineInstanceNetworkInterface
	// Spec is vmi.spec.domain.devices.interfaces; only masquerade matters (its link-local guest
	// addresses are dropped, as KubeVirt does).
	Spec []kvv1.Interface
	// PodCache holds the pod interface cache entries by VMI interface name.
	PodCache map[string]ifacecache.PodIfaceCacheData
	// GuestAgent is domain.status.interfaces as reported by the guest agent, one item per guest
	// interface with MAC, IP, IPs and InterfaceName set (api.InterfaceStatus Mac, Ip, IPs,
	// InterfaceName).
	GuestAgent []kvv1.VirtualMachineInstanceNetworkInterface
	// Previous is vmi.status.interfaces before this update.
	Previous []kvv1.VirtualMachineInstanceNetworkInterface
	// Primary is the cluster's primary IP family (virt-handler's MY_POD_IP); zero means IPv4.
	Primary model.Family
}

// MergeInterfaceStatus is the stable replacement for the pod-cache and guest-agent steps of
// KubeVirt's NetStat.UpdateStatus (updateIfacesStatusFromPodCache, ifacesStatusFromGuestAgent).
// For each Domain interface and each family, the addresses come from the first source that has
// them:
//
//  1. the pod cache entry of that interface: kept as is, whatever the guest agent says;
//  2. the guest agent's addresses for the interface (matched by MAC) if one is routable (global
//     unicast), routable ones first;
//  3. the routable addresses of Previous for the same interface (same name and MAC): a guest that
//     transiently reports only link-local addresses, or nothing, keeps its address;
//  4. the guest agent's link-local addresses.
//
// So guest-agent data adds families that are absent and never clears one that is present, and a
// link-local address never displaces a routable one. KubeVirt v1.8 instead drops a family
// whenever the agent reports none for it (netstat.go updateVMIIfaceStatusWithGuestAgentData), so
// an IPv4 status flaps with a link-local IPv6. The price of rule 3: an address the guest really
// removed stays reported until it reports another routable address of that family or the
// interface goes away.
//
// Families are ordered primary first, except that an interface with a pod cache entry leads with
// the cache's first family: its IP is the cache's first address whatever the agent reports.
// Guest-agent interfaces that match no Domain interface are appended unchanged (at most 10) with
// InfoSource "guest-agent", as KubeVirt does. Pure: the inputs are not modified.
func MergeInterfaceStatus(in StatusInputs) []kvv1.VirtualMachineInstanceNetworkInterface {
	masquerade := make(map[string]bool, len(in.Spec))
	for _, s := range in.Spec {
		masquerade[s.Name] = s.Masquerade != nil
	}
	previous := make(map[string]kvv1.VirtualMachineInstanceNetworkInterface, len(in.Previous))
	for _, p := range in.Previous {
		if p.Name != "" {
			previous[p.Name] = p
		}
	}

	// Like netstat.go (vmispec.LookupInterfaceStatusByMac), an agent interface belongs to the
	// first Domain interface with its MAC; one that matches none is guest-only.
	agentByDomain := make([][]kvv1.VirtualMachineInstanceNetworkInterface, len(in.Domain))
	var guestOnly []kvv1.VirtualMachineInstanceNetworkInterface
	for _, ga := range in.GuestAgent {
		i := slices.IndexFunc(in.Domain, func(d kvv1.VirtualMachineInstanceNetworkInterface) bool {
			return sameMAC(ga.MAC, d.MAC)
		})
		if i < 0 {
			guestOnly = append(guestOnly, ga)
			continue
		}
		agentByDomain[i] = append(agentByDomain[i], ga)
	}

	out := make([]kvv1.VirtualMachineInstanceNetworkInterface, 0, len(in.Domain)+min(len(guestOnly), guestOnlyInterfaceLimit))
	for i, d := range in.Domain {
		status := d
		status.IP, status.IPs = "", nil

		var agent []string
		for j, ga := range agentByDomain[i] {
			if j == 0 {
				// The first agent entry names the guest interface; another one with the same
				// MAC (a VLAN on the VF, say) only contributes addresses.
				status.InterfaceName = ga.InterfaceName
			}
			if ga.InterfaceName != "" {
				// An empty InterfaceName means an old virt-launcher merged domain data into
				// the report (netstat.go isGuestAgentIfaceOriginatedFromOldVirtLauncher).
				status.InfoSource = infoSourceDomainAndGA
			}
			agent = append(agent, ga.IPs...)
		}
		if masquerade[d.Name] {
			// Guest link-local addresses are unreachable through masquerade NAT (netstat.go).
			agent = slices.DeleteFunc(agent, isLinkLocal) // agent is our own slice
		}

		var prev []string
		if p, ok := previous[d.Name]; ok && strings.EqualFold(p.MAC, d.MAC) {
			prev = p.IPs
		}
		var cached []string
		if c, ok := in.PodCache[d.Name]; ok {
			cached = c.PodIPs
			if len(cached) == 0 && c.PodIP != "" {
				cached = []string{c.PodIP}
			}
		}
		status.IPs = mergeAddresses(cached, agent, prev, in.Primary)
		if len(status.IPs) > 0 {
			status.IP = status.IPs[0]
		}
		out = append(out, status)
	}

	for _, ga := range guestOnly[:min(len(guestOnly), guestOnlyInterfaceLimit)] {
		out = append(out, kvv1.VirtualMachineInstanceNetworkInterface{
			MAC:           ga.MAC,
			IP:            ga.IP,
			IPs:           slices.Clone(ga.IPs),
			InterfaceName: ga.InterfaceName,
			InfoSource:    infoSourceGuestAgent,
		})
	}
	return out
}

// mergeAddresses applies the per-family precedence of MergeInterfaceStatus to one interface.
func mergeAddresses(cached, agent, prev []string, primary model.Family) []string {
	cache4, cache6 := splitFamilies(cached)
	agent4, agent6 := splitFamilies(agent)
	prev4, prev6 := splitFamilies(prev)
	v4 := pickFamily(cache4, agent4, prev4)
	v6 := pickFamily(cache6, agent6, prev6)

	lead6 := primary == model.IPv6
	if c := parsedFirst(cached); c.IsValid() {
		lead6 = c.Is6()
	}
	var ips []string
	if lead6 {
		ips = append(append(ips, v6...), v4...)
	} else {
		ips = append(append(ips, v4...), v6...)
	}
	return ips
}

func pickFamily(cached, agent, prev []string) []string {
	if len(cached) > 0 {
		return cached
	}
	routableAgent, linkLocalAgent := splitRoutable(agent)
	if len(routableAgent) > 0 {
		return append(routableAgent, linkLocalAgent...)
	}
	if routablePrev, _ := splitRoutable(prev); len(routablePrev) > 0 {
		return routablePrev
	}
	return linkLocalAgent
}

// splitFamilies splits addresses by family, dropping unparseable ones (as netstat.go
// splitIPByFamiliy does) and duplicates; IPv4-mapped IPv6 counts as IPv4, as net.ParseIP has it.
func splitFamilies(ips []string) (v4, v6 []string) {
	seen := make(map[netip.Addr]bool, len(ips))
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		a = a.Unmap()
		if seen[a] {
			continue
		}
		seen[a] = true
		if a.Is4() {
			v4 = append(v4, s)
		} else {
			v6 = append(v6, s)
		}
	}
	return v4, v6
}

// splitRoutable splits addresses into global unicast ones and the rest (link-local, loopback...).
func splitRoutable(ips []string) (routable, other []string) {
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap().IsGlobalUnicast() {
			routable = append(routable, s)
		} else {
			other = append(other, s)
		}
	}
	return routable, other
}

func parsedFirst(ips []string) netip.Addr {
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

func isLinkLocal(s string) bool {
	a, err := netip.ParseAddr(s)
	return err != nil || a.IsLinkLocalUnicast()
}

// sameMAC compares MACs case-insensitively; KubeVirt compares the strings exactly, but the guest
// agent and the VMI spec may spell the same MAC in different cases. An empty MAC matches nothing.
func sameMAC(a, b string) bool {
	return a != "" && strings.EqualFold(a, b)
}
