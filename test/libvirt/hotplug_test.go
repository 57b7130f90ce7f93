package libvirt_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/libvirtcheck"
)

// rootPortTarget finds the <target .../> of the pcie-root-port with index idx in a libvirt domain XML.
func rootPortTarget(idx int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?s)(<controller type='pci' index='%d' model='pcie-root-port'>.*?<target [^>]*?)(/>)`, idx))
}

// standIn is a virtio RNG at a VF's guest PCI address, with the VF's alias: the device a running domain here
// can hold where the VF sits (a hostdev needs a VFIO device this host lacks). libvirt's detach check below
// reads only the device's PCI address and the controller of its bus, whatever the device type.
func standIn(alias string, bus int) []byte {
	return []byte(fmt.Sprintf(`<rng model='virtio'><backend model='random'>/dev/urandom</backend><alias name='%s'/>`+
		`<address type='pci' domain='0x0000' bus='0x%02x' slot='0x00' function='0x0'/></rng>`, alias, bus))
}

// TestHotplugOffRootPort_VFsSlot_LiveDetachRefusedByLibvirt shows what a migration source meets when the
// pcie-root-port of our VF has hotplug='off', as KubeVirt main's DisableHotplugOnOccupiedRootPorts (#17605,
// pkg/virt-launcher/virtwrap/pci/hotplug.go) means to set on every port that holds a PCI <hostdev>:
// before migrating, virt-launcher detaches every hostdev whose alias starts sriov- (sriov.SafelyDetachHostDevices
// -> DetachDeviceFlags(VIR_DOMAIN_AFFECT_LIVE|CONFIG)), and libvirt refuses that detach itself, so the
// migration fails (and 0003's re-plug never gets its turn). patches/kubevirt/main 0004 keeps those ports
// hotpluggable. Also recorded: libvirt 11.3 writes no busNr on a pcie-root-port's <target>, which is what
// #17605 matches a device's bus against.
func TestHotplugOffRootPort_VFsSlot_LiveDetachRefusedByLibvirt(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Our VF (no pciAddress) in KubeVirt's domain, as libvirt defines it.
	out, err := domain.Apply(kubevirtDomain(t, newVMI(v1.Interface{Name: "udn"})), []model.BoundInterface{bound("udn", "0000:65:00.2", "", nil)})
	require.NoError(t, err)
	readBack, err := e.daemon.ReadBack(ctx, libvirtcheck.ForThisLibvirt(out))
	require.NoErrorf(t, err, "libvirtd log:\n%s", e.daemon.LogTail())
	addr, ok := guestAddresses(t, readBack)[domain.HostdevAlias("udn")]
	require.True(t, ok, "libvirt assigned our VF a guest address")
	bus64, err := strconv.ParseUint(strings.TrimPrefix(addr.Bus, "0x"), 16, 8)
	require.NoError(t, err)
	bus := int(bus64)
	ports := 0
	for _, c := range parseLibvirtDomain(t, readBack).Devices.Controllers {
		if c.Model == "pcie-root-port" {
			ports++
			require.NotNil(t, c.Target)
			assert.Empty(t, c.Target.BusNr, "libvirt 11.3 gives pcie-root-port %s no busNr (#17605 keys ports by it)", c.Index)
		}
	}
	require.Greater(t, ports, bus, "the VF's bus %d is one of the root ports libvirt added", bus)

	// The port of the VF's bus with hotplug='off': libvirt keeps it in the definition virt-launcher starts.
	off := rootPortTarget(bus).ReplaceAll(readBack, []byte("${1} hotplug='off'${2}"))
	require.NotEqual(t, string(readBack), string(off), "found the VF's root port (index %d)", bus)
	kept, err := e.daemon.ReadBack(ctx, off)
	require.NoErrorf(t, err, "libvirtd log:\n%s", e.daemon.LogTail())
	for _, c := range parseLibvirtDomain(t, kept).Devices.Controllers {
		if c.Model == "pcie-root-port" && c.Index == strconv.Itoa(bus) {
			assert.Equal(t, "off", c.Target.Hotplug, "libvirt keeps hotplug='off' on the VF's port")
		}
	}

	// A running domain with the same port layout: the VF's slot behind a port with hotplug='off' (as #17605
	// leaves it) and, for comparison, the same device behind a port left hotpluggable (as 0004 leaves it).
	// TCG, no disk: the firmware finds nothing to boot and the domain stays up, which is all a detach needs.
	var b strings.Builder
	b.WriteString("<domain type='kvm'><name>hotplug-off</name><memory unit='MiB'>64</memory>" +
		"<os><type arch='x86_64' machine='q35'>hvm</type></os><devices><emulator>" + libvirtcheck.Emulator + "</emulator>" +
		"<controller type='pci' index='0' model='pcie-root'/>")
	hotpluggable := bus + 1
	for i := 1; i <= hotpluggable; i++ {
		target := ""
		if i == bus {
			target = "<target hotplug='off'/>"
		}
		fmt.Fprintf(&b, "<controller type='pci' index='%d' model='pcie-root-port'>%s</controller>", i, target)
	}
	vf, control := standIn(domain.HostdevAlias("udn"), bus), standIn("ua-sriov-other", hotpluggable)
	b.Write(vf)
	b.Write(control)
	b.WriteString("<memballoon model='none'/></devices></domain>")
	running, err := e.daemon.Create(ctx, []byte(b.String()))
	require.NoErrorf(t, err, "libvirtd log:\n%s", e.daemon.LogTail())
	defer func() { assert.NoError(t, running.Destroy(context.Background())) }()

	answer, err := running.DetachDevice(ctx, vf)
	require.Error(t, err, "virsh detach-device --live of the device behind the hotplug='off' port")
	want := fmt.Sprintf("cannot hot unplug rng device with PCI guest address: 0000:%02x:00.0 - not allowed by controller", bus)
	assert.Contains(t, answer, want, "libvirt's own refusal")
	t.Logf("detach behind hotplug='off' (bus %d): %s", bus, strings.TrimSpace(answer))

	answer, err = running.DetachDevice(ctx, control)
	assert.NoErrorf(t, err, "virsh detach-device --live behind a hotpluggable port: %s", answer)
	t.Logf("detach behind a hotpluggable port (bus %d): accepted", hotpluggable)
}
