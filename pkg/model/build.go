package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Options are the sidecar settings Build needs.
type Options struct {
	BindingName string // the binding name in the KubeVirt CR: interfaces with binding.name equal to it are ours
	PodIP       string // env MY_POD_IP, "" when unset: it decides the primary IP family
}

// Values of pod-networks fields this package interprets.
const (
	RolePrimary  = "primary"
	IPAMModeDHCP = "dhcp"
)

// isOrdinalIfaceName matches KubeVirt's legacy pod interface names "net<N>"
// (namescheme.OrdinalSecondaryInterfaceName).
func isOrdinalIfaceName(s string) bool {
	n, ok := strings.CutPrefix(s, ordinalIfacePrefix)
	return ok && n != "" && onlyBytesOf(n, "0123456789")
}

// derived is one BoundInterface plus which snapshot entries were found for it, and the values the
// mismatch checks compare (zero when absent): network-status's "mac" and "mtu", and the first "mac" and
// "mtu" of network-info (the device-info file, else the annotation) with where each came from.
type derived struct {
	BoundInterface
	hasNetworkStatus bool
	hasPodNetworks   bool
	podNetworksKey   string
	statusMAC        netval.MAC
	statusMTU        int
	infoMAC          netval.MAC
	infoMACSource    string
	infoMTU          int
	infoMTUSource    string
}

// Build derives every bound interface, in VMI spec order, from what the snapshot has now. It never
// waits: fields it cannot fill yet stay empty (MissingFor* say which ones matter). It fails only on
// wrong input: a bound interface whose network is missing or not Multus, duplicate MACs, invalid values
// (each an *InputError), or snapshot Problems (a malformed source will not heal by waiting, so the hook
// fails at once, not after its timeout). A VMI with no bound interface gives nil, nil.
func Build(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) ([]BoundInterface, error) {
	return Derive(vmi, snap, opts).Interfaces()
}

// Derivation is one derivation of a VMI's bound interfaces from one snapshot: Build's result, and what
// the Missing* and *Mismatches checks read, from a single pass (pkg/pipeline derives once per snapshot).
// ds is empty when err is set, so the checks report nothing when Build fails: a hook stops at once and
// Build names the error.
type Derivation struct {
	ds     []derived
	ifaces []BoundInterface
	err    error
}

// Derive derives every bound interface from what snap has now, as Build does, and keeps the result.
func Derive(vmi *VirtualMachineInstance, snap *downwardapi.Snapshot, opts Options) *Derivation {
	ds, err := build(vmi, snap, opts)
	dv := &Derivation{ds: ds, err: err}
	for i := range ds {
		dv.ifaces = append(dv.ifaces, ds[i].BoundInterface)
	}
	return dv
}

// Interfaces is Build's result: the bound interfaces in VMI spec order, or the error of wrong input.
// Callers treat the interfaces as read-only.
func (d *Derivation) Interfaces() ([]BoundInterface, error) { return d.ifaces, d.err }

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
		if _, err := netval.ParseAddr(strings.TrimSpace(opts.PodIP)); err != nil {
			return nil, &InputError{Source: SourcePodIPEnv, Err: fmt.Errorf("invalid IP address %s", netval.Quote(opts.PodIP))}
		}
	}
	primary := PrimaryFamily(snap, opts.PodIP)

	// One ordinal name switches the whole pod to the ordinal scheme (KubeVirt namescheme.CreateFromNetworkStatuses).
	ordinal := slices.ContainsFunc(snap.NetworkStatus, func(st downwardapi.NetworkStatus) bool { return isOrdinalIfaceName(st.Interface) })

	idx := snapshotIndex{
		status:   indexBy(snap.NetworkStatus, func(s *downwardapi.NetworkStatus) string { return s.Interface }),
		fileInfo: indexNetworkInfo(snap.DeviceInfo),
		annInfo:  indexNetworkInfo(snap.NetworkInfo),
	}
	out := make([]derived, 0, len(bindings))
	macOwner := make(map[netval.MAC]int, len(bindings))
	for _, b := range bindings {
		d, err := derive(b, snap, idx, primary, ordinal, vmi.Namespace)
		if err != nil {
			return nil, err
		}
		if key := d.MAC; !key.IsZero() {
			if i, dup := macOwner[key]; dup {
				other := &out[i]
				return nil, &InputError{Interface: d.Name, Network: d.Network, Source: macSourceInput[d.MACSource], Field: "mac",
					Err: fmt.Errorf("MAC %s is also the MAC of interface %s (from %s): the guest could not tell the NICs apart",
						key, netval.Quote(other.Name), other.MACSource)}
			}
			macOwner[key] = len(out)
		}
		out = append(out, d)
	}
	return out, nil
}

// macSourceInput is the input each MACSource stands for, as InputError.Source names it.
var macSourceInput = map[MACSource]string{MACFromVMI: SourceVMI, MACFromNetworkStatus: downwardapi.NetworkStatusAnnotation,
	MACFromPodNetworks: downwardapi.PodNetworksAnnotation, MACFromNetworkInfo: downwardapi.NetworkInfoAnnotation}

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
	if err := d.setGuestDevice(b.iface, f); err != nil {
		return d, err
	}
	// The snapshot entries of the interface, nil where absent; network-info comes from the device-info
	// file (fileInfo) and the kubevirt.io/network-info annotation (annInfo).
	st, err := lookupNetworkStatus(snap.NetworkStatus, idx.status, d.PodInterfaceName, b.nad, vmiNamespace, f)
	if err != nil {
		return d, err
	}
	fileInfo, err := lookupNetworkInfo(snap.DeviceInfo, idx.fileInfo, b.network.Name, SourceDeviceInfoFile, f)
	if err != nil {
		return d, err
	}
	annInfo, err := lookupNetworkInfo(snap.NetworkInfo, idx.annInfo, b.network.Name, downwardapi.NetworkInfoAnnotation, f)
	if err != nil {
		return d, err
	}
	var pn *downwardapi.PodNetwork
	if p, ok := snap.PodNetworks[b.podNetworksKey]; ok {
		pn = &p
	}
	d.hasNetworkStatus, d.hasPodNetworks = st != nil, pn != nil
	if err := d.setMAC(b.iface.MacAddress, st, fileInfo, annInfo, pn, f); err != nil {
		return d, err
	}
	if err := d.setDeviceInfo(st, fileInfo, annInfo, f); err != nil {
		return d, err
	}
	if err := d.setPodNetworkMode(pn, f); err != nil {
		return d, err
	}
	if err := d.setL3(st, pn, primary, f); err != nil {
		return d, err
	}
	if st != nil {
		if err := d.setDNS(st.DNS, f); err != nil {
			return d, err
		}
	}
	return d, d.setMTU(st, fileInfo, annInfo, f)
}

// setGuestDevice copies what the VMI spec says of the guest device: PCI address and boot order.
func (d *derived) setGuestDevice(iface Interface, f ifaceFailer) error {
	if iface.PciAddress != "" {
		if _, err := netval.ParsePCIAddress(iface.PciAddress); err != nil {
			return f.fail(SourceVMI, "spec.domain.devices.interfaces[].pciAddress", err)
		}
		d.GuestPCIAddress = strings.ToLower(iface.PciAddress)
	}
	if iface.BootOrder != nil {
		order := *iface.BootOrder
		d.BootOrder = &order
	}
	return nil
}

// setPodNetworkMode takes DHCP and the role from pod-networks.
func (d *derived) setPodNetworkMode(pn *downwardapi.PodNetwork, f ifaceFailer) error {
	if pn == nil {
		return nil
	}
	switch pn.IPAMMode {
	case "":
	case IPAMModeDHCP:
		d.DHCP = true
	default:
		return f.fail(downwardapi.PodNetworksAnnotation, "ipam_mode", fmt.Errorf("unsupported IPAM mode %s", netval.Quote(pn.IPAMMode)))
	}
	// A role is a short word of lower-case letters and '-'.
	if len(pn.Role) > 63 || !onlyBytesOf(pn.Role, "abcdefghijklmnopqrstuvwxyz-") {
		return f.fail(downwardapi.PodNetworksAnnotation, "role", fmt.Errorf("invalid role %s", netval.Quote(pn.Role)))
	}
	d.Role = pn.Role
	return nil
}

// setMTU takes the MTU from network-status "mtu", else the device-info file's, else the network-info
// annotation's (KubeVirt >= v1.9 copies network-status's there: pkg/network/downwardapi/networkinfo.go).
// network-status wins a disagreement: it is the CNI's own record, network-info virt-controller's copy.
// 0 means absent; every present value must be a usable MTU.
func (d *derived) setMTU(st *downwardapi.NetworkStatus, fileInfo, annInfo *downwardapi.NetworkInfoInterface, f ifaceFailer) error {
	type candidate struct {
		where, field string
		value        int
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
		if err := netval.CheckMTU(c.value); err != nil {
			return f.fail(c.where, c.field, err)
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
	if !ok {
		return nil, nil
	}
	if i == ambiguous {
		return nil, f.fail(downwardapi.NetworkStatusAnnotation, "interface", fmt.Errorf("several entries for pod interface %s", netval.Quote(podIface)))
	}
	found := &statuses[i]
	// Only the entries we use are checked (downwardapi.ParseNetworkStatus): this one is ours.
	if err := downwardapi.CheckNetworkStatusEntry(i, *found); err != nil {
		return nil, f.fail(err.Source, err.Field, err.Err)
	}
	ns, bare, _ := strings.Cut(nad, "/")
	if found.Name != nad && !(found.Name == bare && ns == vmiNamespace) {
		return nil, f.fail(downwardapi.NetworkStatusAnnotation, "name",
			fmt.Errorf("entry for pod interface %s names network %s, expected %s", netval.Quote(podIface), netval.Quote(found.Name), netval.Quote(nad)))
	}
	return found, nil
}

// lookupNetworkInfo finds the network-info entry of a VMI network; nil when info or the entry is absent.
func lookupNetworkInfo(info *downwardapi.NetworkInfo, index map[string]int, network, source string,
	f ifaceFailer) (*downwardapi.NetworkInfoInterface, error) {
	i, ok := index[network]
	if !ok {
		return nil, nil
	}
	if i == ambiguous {
		return nil, f.fail(source, "interfaces[].network", fmt.Errorf("several entries for network %s", netval.Quote(network)))
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
