package model

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// Options are the sidecar settings Build needs.
type Options struct {
	// BindingName is the binding name in the KubeVirt CR; interfaces with binding.name equal to it
	// are ours.
	BindingName string
	// PodIP is env MY_POD_IP; "" when unset. It decides the primary IP family.
	PodIP string
}

// Values of pod-networks fields this package interprets.
const (
	RolePrimary  = "primary"
	IPAMModeDHCP = "dhcp"
)

// Prefix lengths assumed for an address that only network-status has (it carries no prefix), and
// how far they may be widened to put a same-family gateway on-link. /24 and /64 are the commonest
// subnet sizes; narrower than the real subnet only loses direct reach to far peers (still reached
// through the gateway), while much wider would capture routes of the guest's other NICs.
const (
	guessedPrefixIPv4 = 24
	guessedPrefixIPv6 = 64
	widestPrefixIPv4  = 16
	widestPrefixIPv6  = 48
)

const (
	minMTU = 68 // RFC 791 minimum
	maxMTU = 65535
)

// knownDeviceType reports the device-info types Multus defines (downwardapi.DeviceInfoType*). Only "pci" can
// be wired as a VF hostdev; the others are recorded in DeviceType for the domain step to reject.
func knownDeviceType(t string) bool {
	switch t {
	case downwardapi.DeviceInfoTypePCI, downwardapi.DeviceInfoTypeVDPA, downwardapi.DeviceInfoTypeVHostUser, downwardapi.DeviceInfoTypeMemif:
		return true
	}
	return false
}

// isOrdinalIfaceName matches KubeVirt's legacy pod interface names "net<N>"
// (namescheme.OrdinalSecondaryInterfaceName).
func isOrdinalIfaceName(s string) bool {
	n, ok := strings.CutPrefix(s, "net")
	if !ok || n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// derived is one BoundInterface plus which snapshot entries were found for it.
type derived struct {
	BoundInterface
	hasNetworkStatus bool
	hasPodNetworks   bool
	podNetworksKey   string
	// statusMAC is network-status's "mac" for the interface (nil when absent), kept to tell the
	// operator when it disagrees with the VMI's macAddress (MACMismatches).
	statusMAC net.HardwareAddr
	// infoMAC and infoMTU are the first "mac" and "mtu" that network-info has for the interface (the
	// device-info file, else the kubevirt.io/network-info annotation; nil and 0 when absent), and
	// infoMACSource / infoMTUSource name where each came from: kept for MACMismatches and
	// NetworkInfoMismatches. statusMTU is network-status's "mtu" (0 when absent).
	infoMAC       net.HardwareAddr
	infoMACSource string
	infoMTU       int
	infoMTUSource string
	statusMTU     int
}

// Build derives every bound interface, in VMI spec order, from what the snapshot has now. It never
// waits: fields it cannot fill yet stay empty (MissingFor* say which ones matter). It returns an
// error only for wrong input, never for late input: a bound interface whose network is missing or
// not Multus, duplicate MACs across bound interfaces, invalid values (each an *InputError naming
// interface, network, source and field), or a snapshot with Problems (a source that exists but is
// malformed will not heal by waiting, so the hook fails at once instead of after its timeout). A
// VMI with no bound interface gives nil, nil whatever the snapshot holds.
func Build(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) ([]BoundInterface, error) {
	ds, err := build(vmi, snap, opts)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, nil
	}
	out := make([]BoundInterface, len(ds))
	for i := range ds {
		out[i] = ds[i].BoundInterface
	}
	return out, nil
}

func build(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) ([]derived, error) {
	bindings, err := resolveBindings(vmi, opts.BindingName)
	if err != nil || len(bindings) == 0 {
		return nil, err
	}
	if snap == nil {
		snap = &downwardapi.Snapshot{}
	}
	if len(snap.Problems) > 0 {
		return nil, fmt.Errorf("malformed downward API input: %w", errors.Join(snap.Problems...))
	}
	if opts.PodIP != "" {
		if _, err := netip.ParseAddr(strings.TrimSpace(opts.PodIP)); err != nil {
			return nil, &InputError{Source: SourcePodIPEnv, Err: fmt.Errorf("invalid IP address %s", quote(opts.PodIP))}
		}
	}
	primary := PrimaryFamily(snap, opts.PodIP)

	ordinal := false
	for _, st := range snap.NetworkStatus {
		if isOrdinalIfaceName(st.Interface) {
			// KubeVirt switches the whole pod to the ordinal scheme (namescheme.CreateFromNetworkStatuses).
			ordinal = true
			break
		}
	}

	idx := snapshotIndex{
		status:   indexBy(snap.NetworkStatus, func(s *downwardapi.NetworkStatus) string { return s.Interface }),
		fileInfo: indexNetworkInfo(snap.DeviceInfo),
		annInfo:  indexNetworkInfo(snap.NetworkInfo),
	}
	out := make([]derived, 0, len(bindings))
	macOwner := make(map[string]int, len(bindings))
	for _, b := range bindings {
		d, err := derive(b, snap, idx, primary, ordinal, vmi.Namespace)
		if err != nil {
			return nil, err
		}
		if d.MAC != nil {
			key := d.MAC.String()
			if i, dup := macOwner[key]; dup {
				other := &out[i]
				return nil, &InputError{Interface: d.Name, Network: d.Network, Source: d.MACSource.sourceName(), Field: "mac",
					Err: fmt.Errorf("MAC %s is also the MAC of interface %s (from %s): the guest could not tell the NICs apart",
						key, quote(other.Name), other.MACSource)}
			}
			macOwner[key] = len(out)
		}
		out = append(out, d)
	}
	return out, nil
}

// sourceName is the input a MACSource stands for, as InputError.Source names it.
func (s MACSource) sourceName() string {
	switch s {
	case MACFromNetworkStatus:
		return downwardapi.NetworkStatusAnnotation
	case MACFromPodNetworks:
		return downwardapi.PodNetworksAnnotation
	case MACFromNetworkInfo:
		return downwardapi.NetworkInfoAnnotation
	default:
		return SourceVMI
	}
}

// ifaceFailer builds InputErrors for one bound interface.
type ifaceFailer struct{ iface, network string }

func (f ifaceFailer) fail(source, field string, err error) error {
	return &InputError{Interface: f.iface, Network: f.network, Source: source, Field: field, Err: err}
}

func derive(b binding, snap *downwardapi.Snapshot, idx snapshotIndex, primary Family, ordinal bool, vmiNamespace string) (derived, error) {
	f := ifaceFailer{iface: b.iface.Name, network: b.network.Name}
	d := derived{BoundInterface: BoundInterface{
		Name:             b.iface.Name,
		Network:          b.network.Name,
		NetworkName:      b.nad,
		PodInterfaceName: b.hashedIface,
	}, podNetworksKey: b.podNetworksKey}
	if ordinal {
		d.PodInterfaceName = b.ordinalIface
	}

	if b.iface.PciAddress != "" {
		if !downwardapi.IsPCIAddress(b.iface.PciAddress) {
			return d, f.fail(SourceVMI, "spec.domain.devices.interfaces[].pciAddress",
				fmt.Errorf("invalid PCI address %s", quote(b.iface.PciAddress)))
		}
		d.GuestPCIAddress = strings.ToLower(b.iface.PciAddress)
	}
	if b.iface.BootOrder != nil {
		order := *b.iface.BootOrder
		d.BootOrder = &order
	}

	st, err := lookupNetworkStatus(snap.NetworkStatus, idx.status, d.PodInterfaceName, b.nad, vmiNamespace, f)
	if err != nil {
		return d, err
	}
	var pn *downwardapi.PodNetwork
	if p, ok := snap.PodNetworks[b.podNetworksKey]; ok {
		pn = &p
	}
	d.hasNetworkStatus, d.hasPodNetworks = st != nil, pn != nil

	fileInfo, err := lookupNetworkInfo(snap.DeviceInfo, idx.fileInfo, b.network.Name, SourceDeviceInfoFile, f)
	if err != nil {
		return d, err
	}
	annInfo, err := lookupNetworkInfo(snap.NetworkInfo, idx.annInfo, b.network.Name, downwardapi.NetworkInfoAnnotation, f)
	if err != nil {
		return d, err
	}

	if err := d.setMAC(b.iface.MacAddress, st, fileInfo, annInfo, pn, f); err != nil {
		return d, err
	}
	if err := d.setDeviceInfo(st, fileInfo, annInfo, f); err != nil {
		return d, err
	}
	if pn != nil {
		switch pn.IPAMMode {
		case "":
		case IPAMModeDHCP:
			d.DHCP = true
		default:
			return d, f.fail(downwardapi.PodNetworksAnnotation, "ipam_mode", fmt.Errorf("unsupported IPAM mode %s", quote(pn.IPAMMode)))
		}
		if !validToken(pn.Role) {
			return d, f.fail(downwardapi.PodNetworksAnnotation, "role", fmt.Errorf("invalid role %s", quote(pn.Role)))
		}
		d.Role = pn.Role
	}
	if err := d.setL3(st, pn, primary, f); err != nil {
		return d, err
	}
	if st != nil {
		if err := d.setDNS(st.DNS, f); err != nil {
			return d, err
		}
	}
	if err := d.setMTU(st, fileInfo, annInfo, f); err != nil {
		return d, err
	}
	return d, nil
}

// setMTU takes the MTU from network-status "mtu", else the device-info file's "mtu", else the
// kubevirt.io/network-info annotation's (KubeVirt >= v1.9 copies network-status's there:
// pkg/network/downwardapi/networkinfo.go generateNetworkInfo). network-status wins a disagreement because
// it is the CNI's own record, while network-info is virt-controller's copy of it; with device-info only
// (no pod-info) network-info is the only source, and before v1.9 there is none there. 0 means absent;
// every present value must be a usable MTU.
func (d *derived) setMTU(st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface, f ifaceFailer) error {
	type candidate struct {
		where string
		field string
		value int
	}
	var cands []candidate
	if st != nil {
		cands = append(cands, candidate{downwardapi.NetworkStatusAnnotation, "mtu", st.Mtu})
		d.statusMTU = st.Mtu
	}
	if fileInfo != nil {
		cands = append(cands, candidate{SourceDeviceInfoFile, "interfaces[].mtu", fileInfo.Mtu})
	}
	if annInfo != nil {
		cands = append(cands, candidate{downwardapi.NetworkInfoAnnotation, "interfaces[].mtu", annInfo.Mtu})
	}
	for _, c := range cands {
		if c.value == 0 {
			continue
		}
		if c.value < minMTU || c.value > maxMTU {
			return f.fail(c.where, c.field, fmt.Errorf("MTU %d is outside %d-%d", c.value, minMTU, maxMTU))
		}
		if d.MTU == 0 {
			d.MTU = c.value
		}
		if c.where != downwardapi.NetworkStatusAnnotation && d.infoMTU == 0 {
			d.infoMTU, d.infoMTUSource = c.value, c.where
		}
	}
	return nil
}

// lookupNetworkStatus finds the network-status entry of a pod interface; it must name the
// interface's NAD ("<ns>/<nad>", or the bare NAD name), else the annotation contradicts the VMI.
func lookupNetworkStatus(statuses []downwardapi.NetworkStatus, index map[string]int, podIface, nad, vmiNamespace string,
	f ifaceFailer) (*downwardapi.NetworkStatus, error) {
	i, ok := index[podIface]
	switch {
	case !ok:
		return nil, nil
	case i == ambiguous:
		return nil, f.fail(downwardapi.NetworkStatusAnnotation, "interface",
			fmt.Errorf("several entries for pod interface %s", quote(podIface)))
	}
	found := &statuses[i]
	ns, bare, _ := strings.Cut(nad, "/")
	if found.Name != nad && !(found.Name == bare && ns == vmiNamespace) {
		return nil, f.fail(downwardapi.NetworkStatusAnnotation, "name",
			fmt.Errorf("entry for pod interface %s names network %s, expected %s", quote(podIface), quote(found.Name), quote(nad)))
	}
	return found, nil
}

// lookupNetworkInfo finds the network-info entry of a VMI network; nil when info or the entry is absent.
func lookupNetworkInfo(info *downwardapi.NetworkInfo, index map[string]int, network, source string,
	f ifaceFailer) (*downwardapi.NetworkInfoInterface, error) {
	i, ok := index[network]
	switch {
	case !ok:
		return nil, nil
	case i == ambiguous:
		return nil, f.fail(source, "interfaces[].network", fmt.Errorf("several entries for network %s", quote(network)))
	}
	return &info.Interfaces[i], nil
}

// ambiguous marks, in a snapshotIndex map, a key that several entries share.
const ambiguous = -1

// snapshotIndex finds snapshot entries by key, so that Build stays linear in the number of interfaces.
type snapshotIndex struct {
	status   map[string]int // network-status entries by pod interface name
	fileInfo map[string]int // device-info file entries by VMI network name
	annInfo  map[string]int // kubevirt.io/network-info entries by VMI network name
}

func indexBy[T any](items []T, key func(*T) string) map[string]int {
	index := make(map[string]int, len(items))
	for i := range items {
		k := key(&items[i])
		if _, dup := index[k]; dup {
			index[k] = ambiguous
			continue
		}
		index[k] = i
	}
	return index
}

func indexNetworkInfo(info *downwardapi.NetworkInfo) map[string]int {
	if info == nil {
		return nil
	}
	return indexBy(info.Interfaces, func(i *downwardapi.NetworkInfoInterface) string { return i.Network })
}

// setMAC applies DESIGN.md's precedence: VMI macAddress, network-status mac, network-info mac (a copy
// of network-status mac, present when only device-info is mounted; the device-info file before the
// annotation), pod-networks mac_address. Every
// present value is validated; an all-zero MAC counts as absent (SR-IOV CNI reports no admin MAC so).
func (d *derived) setMAC(vmiMAC string, st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface,
	pn *downwardapi.PodNetwork, f ifaceFailer) error {
	type candidate struct {
		source MACSource
		where  string
		field  string
		value  string
	}
	cands := []candidate{{MACFromVMI, SourceVMI, "spec.domain.devices.interfaces[].macAddress", vmiMAC}}
	if st != nil {
		cands = append(cands, candidate{MACFromNetworkStatus, downwardapi.NetworkStatusAnnotation, "mac", st.Mac})
	}
	if fileInfo != nil {
		cands = append(cands, candidate{MACFromNetworkInfo, SourceDeviceInfoFile, "interfaces[].mac", fileInfo.Mac})
	}
	if annInfo != nil {
		cands = append(cands, candidate{MACFromNetworkInfo, downwardapi.NetworkInfoAnnotation, "interfaces[].mac", annInfo.Mac})
	}
	for _, c := range cands {
		if c.value == "" {
			continue
		}
		mac, err := parseMAC(c.value)
		if err != nil {
			return f.fail(c.where, c.field, err)
		}
		if mac != nil && d.MAC == nil {
			d.MAC, d.MACSource = mac, c.source
		}
		switch {
		case c.source == MACFromNetworkStatus:
			d.statusMAC = mac
		case c.source == MACFromNetworkInfo && d.infoMAC == nil:
			d.infoMAC, d.infoMACSource = mac, c.where
		}
	}
	if pn != nil && len(pn.MAC) > 0 {
		if err := checkMAC(pn.MAC); err != nil {
			return f.fail(downwardapi.PodNetworksAnnotation, "mac_address", err)
		}
		if d.MAC == nil && !isZero(pn.MAC) {
			d.MAC, d.MACSource = append(net.HardwareAddr(nil), pn.MAC...), MACFromPodNetworks
		}
	}
	return nil
}

func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil, fmt.Errorf("invalid MAC %s", quote(s))
	}
	if err := checkMAC(mac); err != nil {
		return nil, err
	}
	if isZero(mac) {
		return nil, nil
	}
	return mac, nil
}

func checkMAC(mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("MAC %s is not a 48-bit Ethernet address", quote(mac.String()))
	}
	if mac[0]&1 == 1 {
		return fmt.Errorf("MAC %s is a multicast address", mac)
	}
	return nil
}

func isZero(mac net.HardwareAddr) bool {
	for _, b := range mac {
		if b != 0 {
			return false
		}
	}
	return true
}

// setDeviceInfo takes device-info from the device-info file, else the kubevirt.io/network-info
// annotation, else network-status device-info (DESIGN.md section 2).
func (d *derived) setDeviceInfo(st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface, f ifaceFailer) error {
	var di *downwardapi.DeviceInfo
	var source, field string
	switch {
	case fileInfo != nil && fileInfo.DeviceInfo != nil:
		di, source, field = fileInfo.DeviceInfo, SourceDeviceInfoFile, "interfaces[].deviceInfo"
	case annInfo != nil && annInfo.DeviceInfo != nil:
		di, source, field = annInfo.DeviceInfo, downwardapi.NetworkInfoAnnotation, "interfaces[].deviceInfo"
	case st != nil && st.DeviceInfo != nil:
		di, source, field = st.DeviceInfo, downwardapi.NetworkStatusAnnotation, "device-info"
	default:
		return nil
	}
	if !knownDeviceType(di.Type) {
		return f.fail(source, field+".type", fmt.Errorf("unknown device type %s", quote(di.Type)))
	}
	d.DeviceType = di.Type
	if di.Type != downwardapi.DeviceInfoTypePCI {
		return nil
	}
	if di.Pci == nil || di.Pci.PciAddress == "" {
		return f.fail(source, field+".pci.pci-address", errors.New("device type pci without a PCI address"))
	}
	if !downwardapi.IsPCIAddress(di.Pci.PciAddress) {
		return f.fail(source, field+".pci.pci-address", fmt.Errorf("invalid PCI address %s", quote(di.Pci.PciAddress)))
	}
	d.HostPCIAddress = strings.ToLower(di.Pci.PciAddress)
	return nil
}

// setL3 fills Addresses, PrefixKnown, Gateways and Routes.
func (d *derived) setL3(st *downwardapi.NetworkStatus, pn *downwardapi.PodNetwork, primary Family, f ifaceFailer) error {
	// Gateways first: a guessed prefix is widened to reach them.
	type gwCand struct {
		addr          netip.Addr
		source, field string // field is a format with the list index as its argument
		index         int
	}
	var cands []gwCand
	if pn != nil {
		// pod-networks gateway_ips become a default route only for the primary role: OVN-K sets them on
		// a secondary only when asked to, and a secondary NIC must not take the guest's default route.
		if pn.Role == RolePrimary {
			for i, g := range pn.Gateways {
				cands = append(cands, gwCand{g, downwardapi.PodNetworksAnnotation, "gateway_ips[%d]", i})
			}
		}
		for i, r := range pn.Routes {
			if r.Dest.IsValid() && r.Dest.Bits() == 0 {
				cands = append(cands, gwCand{r.NextHop, downwardapi.PodNetworksAnnotation, "routes[%d].nextHop", i})
			}
		}
	}
	if st != nil {
		// network-status "gateway" holds only the CNI result's default routes (utils.CreateNetworkStatus).
		for i, s := range st.Gateway {
			a, err := parseAddr(s)
			if err != nil {
				return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("gateway[%d]", i), err)
			}
			cands = append(cands, gwCand{a, downwardapi.NetworkStatusAnnotation, "gateway[%d]", i})
		}
	}
	have := map[Family]bool{}
	for _, c := range cands {
		if err := checkUnicast(c.addr); err != nil {
			return f.fail(c.source, fmt.Sprintf(c.field, c.index), err)
		}
		// A link-local next hop needs the guest's interface name to be usable, which cloud-init's
		// v1/v2/network_data.json gateways cannot carry portably; OVN-K also gives a global gateway.
		if c.addr.IsLinkLocalUnicast() || have[FamilyOf(c.addr)] {
			continue
		}
		have[FamilyOf(c.addr)] = true
		d.Gateways = append(d.Gateways, c.addr)
	}
	sortByFamily(d.Gateways, primary, FamilyOf)

	seen := map[netip.Addr]bool{}
	if pn != nil && len(pn.IPAddresses) > 0 {
		for i, p := range pn.IPAddresses {
			field := func() string { return fmt.Sprintf("ip_addresses[%d]", i) }
			if !p.IsValid() {
				return f.fail(downwardapi.PodNetworksAnnotation, field(), errors.New("invalid CIDR"))
			}
			if err := checkUnicast(p.Addr()); err != nil {
				return f.fail(downwardapi.PodNetworksAnnotation, field(), err)
			}
			if p.Addr().Is4In6() {
				return f.fail(downwardapi.PodNetworksAnnotation, field(), fmt.Errorf("IPv4-mapped IPv6 address %s", p))
			}
			if skipAddress(p.Addr()) || seen[p.Addr()] {
				continue
			}
			seen[p.Addr()] = true
			d.Addresses = append(d.Addresses, p)
		}
		d.PrefixKnown = len(d.Addresses) > 0
	} else if st != nil {
		for i, s := range st.IPs {
			a, err := parseAddr(s)
			if err == nil {
				err = checkUnicast(a)
			}
			if err != nil {
				return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("ips[%d]", i), err)
			}
			if skipAddress(a) || seen[a] {
				continue
			}
			seen[a] = true
			d.Addresses = append(d.Addresses, GuessPrefix(a, d.Gateways))
		}
	}
	sortByFamily(d.Addresses, primary, func(p netip.Prefix) Family { return FamilyOf(p.Addr()) })

	if pn != nil {
		type routeKey struct {
			dest netip.Prefix
			hop  netip.Addr
		}
		seenRoute := map[routeKey]bool{}
		for i, r := range pn.Routes {
			field := "routes[" + strconv.Itoa(i) + "]"
			if !r.Dest.IsValid() {
				return f.fail(downwardapi.PodNetworksAnnotation, field+".dest", errors.New("invalid CIDR"))
			}
			if r.Dest.Bits() == 0 {
				continue // carried as a gateway above
			}
			dest := r.Dest.Masked()
			hop := r.NextHop
			if hop.IsValid() && hop.IsUnspecified() {
				hop = netip.Addr{} // on-link
			}
			if hop.IsValid() {
				if FamilyOf(hop) != FamilyOf(dest.Addr()) {
					return f.fail(downwardapi.PodNetworksAnnotation, field+".nextHop",
						fmt.Errorf("next hop %s is not in the family of destination %s", hop, dest))
				}
				if err := checkUnicast(hop); err != nil {
					return f.fail(downwardapi.PodNetworksAnnotation, field+".nextHop", err)
				}
			}
			k := routeKey{dest, hop}
			if seenRoute[k] {
				continue
			}
			seenRoute[k] = true
			d.Routes = append(d.Routes, Route{Dest: dest, NextHop: hop})
		}
		sortByFamily(d.Routes, primary, func(r Route) Family { return FamilyOf(r.Dest.Addr()) })
	}
	return nil
}

// GuessPrefix gives a bare address (network-status "ips" have no prefix) the prefix this package
// assumes: /24 for IPv4, /64 for IPv6, widened (at most to /16 or /48) until the first same-family
// gateway is on-link, so that the default route stays usable. Beyond that width the default prefix is
// kept: a gateway that far away is not assumed on-link.
func GuessPrefix(a netip.Addr, gateways []netip.Addr) netip.Prefix {
	bits, widest := guessedPrefixIPv4, widestPrefixIPv4
	if FamilyOf(a) == IPv6 {
		bits, widest = guessedPrefixIPv6, widestPrefixIPv6
	}
	for _, g := range gateways {
		if FamilyOf(g) != FamilyOf(a) {
			continue
		}
		for b := bits; b >= widest; b-- {
			if p, err := a.Prefix(b); err == nil && p.Contains(g) {
				bits = b
				break
			}
		}
		break
	}
	return netip.PrefixFrom(a, bits)
}

// skipAddress drops IPv6 link-local addresses: the guest makes its own from its MAC, and the pod's
// one belongs to the pod interface, not to the VF.
func skipAddress(a netip.Addr) bool {
	return a.Is6() && a.IsLinkLocalUnicast()
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("invalid IP address %s", quote(s))
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %s has a zone", quote(s))
	}
	return a.Unmap(), nil
}

// checkUnicast rejects addresses no NIC or next hop can have.
func checkUnicast(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return errors.New("missing IP address")
	case a.Zone() != "":
		return fmt.Errorf("IP address %s has a zone", a)
	case a.IsUnspecified(), a.IsMulticast(), a.IsLoopback(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is not a unicast address", a)
	}
	return nil
}

func (d *derived) setDNS(dns downwardapi.DNS, f ifaceFailer) error {
	seen := map[netip.Addr]bool{}
	for i, s := range dns.Nameservers {
		a, err := parseAddr(s)
		if err == nil {
			err = checkUnicast(a)
		}
		if err != nil {
			return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("dns.nameservers[%d]", i), err)
		}
		if !seen[a] {
			seen[a] = true
			d.DNS.Nameservers = append(d.DNS.Nameservers, a)
		}
	}
	seenSearch := map[string]bool{}
	for i, s := range dns.Search {
		if !validDNSName(s) {
			return f.fail(downwardapi.NetworkStatusAnnotation, fmt.Sprintf("dns.search[%d]", i), fmt.Errorf("invalid domain %s", quote(s)))
		}
		if !seenSearch[s] {
			seenSearch[s] = true
			d.DNS.Search = append(d.DNS.Search, s)
		}
	}
	if dns.Domain != "" && !validDNSName(dns.Domain) {
		return f.fail(downwardapi.NetworkStatusAnnotation, "dns.domain", fmt.Errorf("invalid domain %s", quote(dns.Domain)))
	}
	d.DNS.Domain = dns.Domain
	return nil
}

// validDNSName accepts a resolv.conf-safe domain: labels of letters, digits, '-' and '_' (used in
// SRV-style names), at most 63 bytes each and 253 in all, optionally ending in a dot.
func validDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isAlnum(label[i]) && label[i] != '-' && label[i] != '_' {
				return false
			}
		}
	}
	return true
}

// validToken accepts "" or a short word of lower-case letters and '-' (pod-networks role values).
func validToken(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < 'a' || s[i] > 'z') && s[i] != '-' {
			return false
		}
	}
	return true
}
