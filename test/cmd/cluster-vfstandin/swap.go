package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/network/downwardapi"
	"kubevirt.io/kubevirt/pkg/network/namescheme"
	"libvirt.org/go/libvirtxml"
)

// ErrHostdev is wrapped by every refusal of the hostdev our sidecar wrote: absent, duplicated or wrong.
var ErrHostdev = errors.New("sriov-udn-binding's hostdev")

// ErrInput is wrapped by every error about the stand-in's own inputs (VMI, device-info, domain XML).
var ErrInput = errors.New("vf-standin input")

const (
	// hostdevAliasPrefix is the alias our sidecar gives a VF's hostdev ("ua-" user alias + KubeVirt's
	// SR-IOV prefix "sriov-", pkg/network/deviceinfo/sriov.go SRIOVAliasPrefix), then the interface name.
	hostdevAliasPrefix = "ua-sriov-"
	// nicAliasPrefix is the alias of the emulated NIC that replaces it, then the interface name. No VMI
	// interface is named "vfstandin-...", so after the swap the domain has no <interface> carrying the bound
	// interface's alias, as on a node whose VF stays a <hostdev>: KubeVirt treats the interface as it treats a
	// real one (virt-launcher's NIC hot-plug picks it, pkg/virt-launcher/virtwrap/network/nichotplug.go). What
	// a hostdev gives and this NIC does not: virt-handler's NetStat reports a hostdev "ua-sriov-<iface>" under
	// the interface's name (sriovIfacesStatusFromDomainHostDevices), and this NIC under "vfstandin-<iface>".
	nicAliasPrefix = "ua-vfstandin-"
	// kubevirtAliasPrefix is the alias KubeVirt gives the domain interface of a VMI interface ("ua-" + its
	// name). A VMI labelled AliasLabel=AliasKubeVirt gets it on the emulated NIC instead, so that NetStat
	// reports the NIC under the interface's name, with its MAC and InfoSource domain, as it reports a real
	// VF's hostdev (and reads the interface's pod cache entry, which it reads only for an interface the domain
	// gave a status entry). That hides the NIC hot-plug defect from those VMIs: the suite uses it only where
	// a test reads vmi.status.interfaces.
	kubevirtAliasPrefix = "ua-"
	// tapPrefix and tapHashLen name the TAP the CNI stand-in makes for a network: "vf" + the first 11
	// hex characters of sha256(the pod interface name), 13 characters, under IFNAMSIZ.
	tapPrefix  = "vf"
	tapHashLen = 11
)

// AliasLabel, set to AliasKubeVirt on a VMI, gives its emulated NICs KubeVirt's own alias (kubevirtAliasPrefix)
// instead of nicAliasPrefix's.
const (
	AliasLabel    = "cluster.sriov-udn.test/vf-standin-alias"
	AliasKubeVirt = "kubevirt"
)

// TapName is the TAP device the CNI stand-in makes in the pod for the network whose pod interface is
// podIfaceName (KubeVirt's hashed name, namescheme.GenerateHashedInterfaceName).
func TapName(podIfaceName string) string {
	sum := sha256.Sum256([]byte(podIfaceName))
	return tapPrefix + hex.EncodeToString(sum[:])[:tapHashLen]
}

// vf is one VMI interface bound to our binding, with what the stand-in needs to check its hostdev and
// replace it.
type vf struct {
	iface      v1.Interface
	pciAddress string // from device-info, "0000:65:00.2"
	mac        string
	tap        string
	nicAlias   string // the emulated NIC's alias
}

func (v vf) alias() string { return hostdevAliasPrefix + v.iface.Name }

// plan lists the interfaces bound to binding, each with its device-info PCI address, MAC and TAP.
func plan(vmi *v1.VirtualMachineInstance, info downwardapi.NetworkInfo, binding string) ([]vf, error) {
	podIfaces := namescheme.CreateHashedNetworkNameScheme(vmi.Spec.Networks)
	nicPrefix := nicAliasPrefix
	if vmi.Labels[AliasLabel] == AliasKubeVirt {
		nicPrefix = kubevirtAliasPrefix
	}
	var out []vf
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Binding == nil || iface.Binding.Name != binding {
			continue
		}
		podIface, ok := podIfaces[iface.Name]
		if !ok {
			return nil, fmt.Errorf("%w: interface %q (binding %q): no secondary Multus network of that name in spec.networks", ErrInput, iface.Name, binding)
		}
		var entry *downwardapi.Interface
		for i := range info.Interfaces {
			if info.Interfaces[i].Network == iface.Name {
				entry = &info.Interfaces[i]
				break
			}
		}
		if entry == nil || entry.DeviceInfo == nil || entry.DeviceInfo.Pci == nil || entry.DeviceInfo.Pci.PciAddress == "" {
			return nil, fmt.Errorf("%w: interface %q: device-info has no PCI address for network %q", ErrInput, iface.Name, iface.Name)
		}
		if entry.DeviceInfo.Type != "pci" {
			return nil, fmt.Errorf("%w: interface %q: device-info type %q, want \"pci\"", ErrInput, iface.Name, entry.DeviceInfo.Type)
		}
		mac := iface.MacAddress
		if mac == "" {
			mac = entry.Mac
		}
		if mac == "" {
			return nil, fmt.Errorf("%w: interface %q: no MAC in spec macAddress or device-info: a real VF has its own, the emulated NIC needs one given", ErrInput, iface.Name)
		}
		out = append(out, vf{iface: iface, pciAddress: entry.DeviceInfo.Pci.PciAddress, mac: mac, tap: TapName(podIface), nicAlias: nicPrefix + iface.Name})
	}
	return out, nil
}

// device is one <hostdev> or <interface> child of <devices>: its bytes' place in the document and its alias.
type device struct {
	element    string
	start, end int64
	alias      string
}

// findHostdevs lists the <hostdev> and <interface> children of /domain/devices, with their byte offsets in doc.
func findHostdevs(doc []byte) ([]device, error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var (
		out   []device
		path  []string
		start int64
	)
	for {
		start = dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: domain XML: %w", ErrInput, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(path) == 2 && path[0] == "domain" && path[1] == "devices" && (t.Name.Local == "hostdev" || t.Name.Local == "interface") {
				var el struct {
					Alias *libvirtxml.DomainAlias `xml:"alias"`
				}
				if err := dec.DecodeElement(&el, &t); err != nil {
					return nil, fmt.Errorf("%w: domain XML: <%s> at byte %d: %w", ErrInput, t.Name.Local, start, err)
				}
				d := device{element: t.Name.Local, start: start, end: dec.InputOffset()}
				if el.Alias != nil {
					d.alias = el.Alias.Name
				}
				out = append(out, d)
				continue
			}
			path = append(path, t.Name.Local)
		case xml.EndElement:
			path = path[:len(path)-1]
		}
	}
	return out, nil
}

// check compares the hostdev our sidecar wrote for v with what KubeVirt and libvirt need for a VF the
// device plugin bound to vfio-pci: every difference is named, with what was expected.
func check(hd *libvirtxml.DomainHostdev, v vf) error {
	var problems []string
	if hd.SubsysPCI == nil {
		problems = append(problems, "not type='pci' in mode='subsystem'")
	} else {
		got := ""
		if hd.SubsysPCI.Source != nil && hd.SubsysPCI.Source.Address != nil {
			got = pciString(hd.SubsysPCI.Source.Address)
		}
		if got != v.pciAddress {
			problems = append(problems, fmt.Sprintf("source address %q, want the device-info pci-address %q", got, v.pciAddress))
		}
	}
	if hd.Managed != "no" {
		problems = append(problems, fmt.Sprintf("managed=%q, want \"no\" (the device plugin binds the VF to vfio-pci, libvirt must not rebind it)", hd.Managed))
	}
	if want := v.iface.PciAddress; want != "" {
		got := ""
		if hd.Address != nil && hd.Address.PCI != nil {
			got = pciString(hd.Address.PCI)
		}
		if got != want {
			problems = append(problems, fmt.Sprintf("guest address %q, want the VMI's pciAddress %q", got, want))
		}
	}
	switch {
	case v.iface.BootOrder != nil && (hd.Boot == nil || hd.Boot.Order != *v.iface.BootOrder):
		problems = append(problems, fmt.Sprintf("boot order %s, want the VMI's bootOrder %d", bootString(hd.Boot), *v.iface.BootOrder))
	case v.iface.BootOrder == nil && hd.Boot != nil:
		problems = append(problems, fmt.Sprintf("boot order %d, but the VMI's interface sets no bootOrder", hd.Boot.Order))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w %q for interface %q: %s", ErrHostdev, v.alias(), v.iface.Name, strings.Join(problems, "; "))
	}
	return nil
}

func pciString(a *libvirtxml.DomainAddressPCI) string {
	val := func(p *uint) uint {
		if p == nil {
			return 0
		}
		return *p
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", val(a.Domain), val(a.Bus), val(a.Slot), val(a.Function))
}

func bootString(b *libvirtxml.DomainDeviceBoot) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprint(b.Order)
}

// Swap checks and replaces, in doc, the hostdev of every interface of vmi bound to binding. Other
// hostdevs and every other byte are left as they are.
func Swap(doc []byte, vmi *v1.VirtualMachineInstance, info downwardapi.NetworkInfo, binding string) ([]byte, error) {
	vfs, err := plan(vmi, info, binding)
	if err != nil || len(vfs) == 0 {
		return doc, err
	}
	found, err := findHostdevs(doc)
	if err != nil {
		return nil, err
	}
	type edit struct {
		start, end int64
		with       []byte
	}
	var edits []edit
	for _, v := range vfs {
		var mine []device
		nics := 0
		for _, d := range found {
			switch {
			case d.element == "hostdev" && d.alias == v.alias():
				mine = append(mine, d)
			case d.element == "interface" && d.alias == v.nicAlias:
				nics++
			}
		}
		switch {
		case len(mine) == 0 && nics == 1:
			// A define of the domain as virt-launcher read it back (the NIC from the first define in it), with
			// KubeVirt's alias on the NIC: our sidecar leaves an interface that has an <interface> aliased
			// ua-<name> alone (KubeVirt wired it, pkg/domain WiredByKubeVirt), and there is nothing to swap.
			continue
		case len(mine) == 0:
			return nil, fmt.Errorf("%w %q for interface %q: absent from the domain: sriov-udn-binding did not wire it, or ran after "+
				"this stand-in (KubeVirt's hook Manager calls sidecars in the order their sockets answer Info)", ErrHostdev, v.alias(), v.iface.Name)
		case len(mine) > 1:
			return nil, fmt.Errorf("%w %q for interface %q: %d of them in the domain, want one", ErrHostdev, v.alias(), v.iface.Name, len(mine))
		}
		raw := doc[mine[0].start:mine[0].end]
		var hd libvirtxml.DomainHostdev
		if err := hd.Unmarshal(string(raw)); err != nil {
			return nil, fmt.Errorf("%w: domain XML: <hostdev> %q: %w", ErrInput, v.alias(), err)
		}
		if err := check(&hd, v); err != nil {
			return nil, err
		}
		nic := libvirtxml.DomainInterface{
			MAC:     &libvirtxml.DomainInterfaceMAC{Address: v.mac},
			Source:  &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}},
			Target:  &libvirtxml.DomainInterfaceTarget{Dev: v.tap, Managed: "no"},
			Model:   &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			Boot:    hd.Boot,
			Alias:   &libvirtxml.DomainAlias{Name: v.nicAlias},
			Address: hd.Address,
		}
		if nics > 0 {
			// virt-launcher defines the domain again with what it already holds, our sidecar wires the VF
			// again, and the NIC made the first time is still there: the hostdev only goes.
			edits = append(edits, edit{start: mine[0].start, end: mine[0].end})
			continue
		}
		out, err := nic.Marshal()
		if err != nil {
			return nil, fmt.Errorf("interface %q: encode the emulated NIC: %w", v.iface.Name, err)
		}
		edits = append(edits, edit{start: mine[0].start, end: mine[0].end, with: []byte(out)})
	}
	slices.SortFunc(edits, func(a, b edit) int { return int(b.start - a.start) }) // last first: offsets stay valid
	res := slices.Clone(doc)
	for _, e := range edits {
		res = slices.Concat(res[:e.start], e.with, res[e.end:])
	}
	return res, nil
}
