//go:build sriovudn_hotplug

// KubeVirt main's DisableHotplugOnOccupiedRootPorts (kubevirt/kubevirt#17605) on a domain as libvirt 11.3
// reads it back: libvirt-11.3-readback.xml is the read-back test/libvirt takes of the sample VMI (KubeVirt's
// converter, a core SR-IOV hostdev, our two VFs as the built sidecar wired them through KubeVirt's hook
// Manager), written with SRIOV_UDN_LIBVIRT_READBACK_OUT. patches/kubevirt/test-main.sh copies this directory into
// pkg/virt-launcher/virtwrap/pci and runs it with -tags sriovudn_hotplug, on the series and on the code
// before 0004.
package pci_test

import (
	"encoding/xml"
	"os"
	"strconv"
	"strings"
	"testing"

	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/pci"
)

// readBack is the fixture as virt-launcher holds a read-back (util.GetDomainSpecWithFlags: xml.Unmarshal
// into api.DomainSpec).
func readBack(t *testing.T) *api.DomainSpec {
	t.Helper()
	raw, err := os.ReadFile("libvirt-11.3-readback.xml")
	if err != nil {
		t.Fatal(err)
	}
	spec := &api.DomainSpec{}
	if err := xml.Unmarshal(raw, spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// portsOff lists the indexes of the pcie-root-ports with hotplug="off".
func portsOff(spec *api.DomainSpec) []string {
	var off []string
	for _, c := range spec.Devices.Controllers {
		if c.Model == api.ControllerModelPCIeRootPort && c.Target != nil && c.Target.Hotplug == "off" {
			off = append(off, c.Index)
		}
	}
	return off
}

// busOf is the bus number of a PCI guest address, as a controller index.
func busOf(t *testing.T, a *api.Address) string {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(a.Bus, "0x"), 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(n, 10)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestLibvirtReadBack_AsLibvirt113ReturnsIt_NoPortMatches(t *testing.T) {
	// libvirt 11.3 writes <target chassis=... port=.../> for a pcie-root-port, no busNr (busNr is a
	// pci-expander-bus attribute), and the function keys every port by Target.BusNr: it turns off nothing.
	spec := readBack(t)
	pci.DisableHotplugOnOccupiedRootPorts(spec)
	if off := portsOff(spec); len(off) != 0 {
		t.Fatalf("ports turned off on libvirt 11.3's read-back: %v, want none (no busNr there)", off)
	}
	t.Logf("libvirt 11.3 read-back: no pcie-root-port turned off (no Target.BusNr to match)")
}

func TestLibvirtReadBack_PortsKeyedByTheirBus_SRIOVPortsStayHotpluggable(t *testing.T) {
	// The same read-back with each root port's busNr set to its index, the bus number its devices'
	// addresses name: the ports the function is meant to find.
	spec := readBack(t)
	for i := range spec.Devices.Controllers {
		c := &spec.Devices.Controllers[i]
		if c.Model != api.ControllerModelPCIeRootPort {
			continue
		}
		n, err := strconv.ParseUint(c.Index, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		nr := uint32(n)
		if c.Target == nil {
			c.Target = &api.ControllerTarget{}
		}
		c.Target.BusNr = &nr
	}
	pci.DisableHotplugOnOccupiedRootPorts(spec)
	off := portsOff(spec)
	t.Logf("ports turned off: %v", off)
	if spec.Devices.Ballooning == nil || spec.Devices.Ballooning.Address == nil || !contains(off, busOf(t, spec.Devices.Ballooning.Address)) {
		t.Errorf("the memory balloon's port is not off: the function did not run on this layout")
	}
	sriov := 0
	for _, h := range spec.Devices.HostDevices {
		if h.Alias == nil || !strings.HasPrefix(h.Alias.GetName(), "sriov-") || h.Address == nil {
			continue
		}
		sriov++
		if bus := busOf(t, h.Address); contains(off, bus) {
			t.Errorf("hostdev %s (bus %s): its root port has hotplug off; the migration source cannot detach it", h.Alias.GetName(), bus)
		}
	}
	if sriov != 3 {
		t.Fatalf("%d SR-IOV hostdevs in the fixture, want 3 (KubeVirt's core one and our two VFs)", sriov)
	}
}
