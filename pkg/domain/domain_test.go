package domain

import (
	"context"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// kubevirtDomain is shaped like what virt-launcher's hook manager sends (xml.MarshalIndent of
// api.DomainSpec with a tab, pkg/hooks/manager.go OnDefineDomain): qemu namespace, KubeVirt
// metadata in its own namespace, a masquerade <interface>, a core SR-IOV hostdev and a block disk.
const kubevirtDomain = `<domain type="kvm" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
	<name>default_vmi-sriov</name>
	<uuid>5d307ca9-b3ef-428c-8861-06e72d69f223</uuid>
	<memory unit="b">134217728</memory>
	<metadata>
		<kubevirt xmlns="http://kubevirt.io">
			<uid>8a2b6d5e-0000-4000-8000-000000000001</uid>
			<graceperiod>
				<deletionGracePeriodSeconds>30</deletionGracePeriodSeconds>
			</graceperiod>
		</kubevirt>
	</metadata>
	<devices>
		<emulator>/usr/libexec/qemu-kvm</emulator>
		<interface type="ethernet">
			<mac address="02:00:00:aa:bb:01"></mac>
			<model type="virtio-non-transitional"></model>
			<alias name="ua-default"></alias>
		</interface>
		<disk device="disk" type="block">
			<source dev="/dev/pvc_block_test" name="pvc_block_test"></source>
			<target bus="virtio" dev="vda"></target>
			<alias name="ua-pvc_block_test"></alias>
		</disk>
		<hostdev type="pci" managed="no">
			<source>
				<address type="pci" domain="0x0000" bus="0x3b" slot="0x02" function="0x4"></address>
			</source>
			<alias name="ua-sriov-core"></alias>
		</hostdev>
	</devices>
	<qemu:commandline>
		<qemu:env name="SLICE" value="1&amp;2"></qemu:env>
	</qemu:commandline>
</domain>`

// udnHostdev is what Apply inserts into kubevirtDomain for udnIface, indented like its devices.
const udnHostdev = `
		<hostdev mode="subsystem" type="pci" managed="no">
			<source>
				<address domain="0x0000" bus="0x65" slot="0x00" function="0x2"></address>
			</source>
			<boot order="2"></boot>
			<alias name="ua-sriov-udn"></alias>
			<address type="pci" domain="0x0000" bus="0x81" slot="0x01" function="0x0"></address>
		</hostdev>`

func udnIface() model.BoundInterface {
	order := uint(2)
	return model.BoundInterface{
		Name:            "udn",
		Network:         "udn-net",
		NetworkName:     "default/udn-nad",
		HostPCIAddress:  "0000:65:00.2",
		DeviceType:      "pci",
		GuestPCIAddress: "0000:81:01.0",
		BootOrder:       &order,
	}
}

// insertAfterLastDevice is kubevirtDomain with text inserted where Apply must put new hostdevs.
func insertAfterLastDevice(t *testing.T, src, text string) string {
	t.Helper()
	const anchor = "\n\t</devices>"
	i := strings.Index(src, anchor)
	require.GreaterOrEqual(t, i, 0, "fixture has no %q", anchor)
	return src[:i] + text + src[i:]
}

// hostdevs returns the <hostdev> children of <devices> with their alias. It does not unmarshal the
// whole domain with libvirtxml: libvirtxml rejects KubeVirt's own SR-IOV hostdev, which has no mode
// attribute (pkg/virt-launcher/virtwrap/device/hostdevice/hostdev.go, createPCIHostDevice).
func hostdevs(t *testing.T, domainXML []byte) []rawHostdev {
	t.Helper()
	var dom struct {
		Devices struct {
			Hostdevs []rawHostdev `xml:"hostdev"`
		} `xml:"devices"`
	}
	require.NoError(t, xml.Unmarshal(domainXML, &dom))
	return dom.Devices.Hostdevs
}

type rawHostdev struct {
	Attrs []xml.Attr `xml:",any,attr"`
	Alias struct {
		Name string `xml:"name,attr"`
	} `xml:"alias"`
	Inner string `xml:",innerxml"`
}

// hostdevByAlias returns the hostdevs with alias, parsed with libvirtxml.
func hostdevByAlias(t *testing.T, domainXML []byte, alias string) []libvirtxml.DomainHostdev {
	t.Helper()
	var found []libvirtxml.DomainHostdev
	for _, raw := range hostdevs(t, domainXML) {
		if raw.Alias.Name != alias {
			continue
		}
		start := "<hostdev"
		for _, a := range raw.Attrs {
			start += fmt.Sprintf(" %s=%q", a.Name.Local, a.Value)
		}
		var hd libvirtxml.DomainHostdev
		require.NoError(t, hd.Unmarshal(start+">"+raw.Inner+"</hostdev>"))
		found = append(found, hd)
	}
	return found
}

func TestHostdevAlias_IsKubeVirtsSRIOVUserAlias(t *testing.T) {
	assert.Equal(t, "ua-sriov-udn", HostdevAlias("udn"))
}

func TestApply_KeepsEveryByteOutsideTheInsertedHostdev(t *testing.T) {
	out, err := Apply([]byte(kubevirtDomain), []model.BoundInterface{udnIface()})
	require.NoError(t, err)

	// The namespaces, qemu:commandline, metadata, the block disk's name= and the core SR-IOV
	// hostdev are all in the expected text verbatim: the only difference is our hostdev.
	assert.Equal(t, insertAfterLastDevice(t, kubevirtDomain, udnHostdev), string(out))
}

func TestApply_CalledOneTwoThreeTimes_OutputIdenticalAfterTheFirst(t *testing.T) {
	ifaces := []model.BoundInterface{udnIface(), {Name: "udn2", Network: "udn2-net", HostPCIAddress: "0000:65:00.3"}}
	first, err := Apply([]byte(kubevirtDomain), ifaces)
	require.NoError(t, err)
	second, err := Apply(first, ifaces)
	require.NoError(t, err)
	third, err := Apply(second, ifaces)
	require.NoError(t, err)

	assert.Equal(t, string(first), string(second))
	assert.Equal(t, string(first), string(third))
	assert.Len(t, hostdevByAlias(t, third, "ua-sriov-udn"), 1)
	assert.Len(t, hostdevByAlias(t, third, "ua-sriov-udn2"), 1)
	assert.Len(t, hostdevs(t, third), 3, "core SR-IOV hostdev plus ours")
}

// beforeDisk is kubevirtDomain with text inserted before its <disk>: between other devices.
func beforeDisk(t *testing.T, text string) string {
	t.Helper()
	i := strings.Index(kubevirtDomain, "\n\t\t<disk ")
	require.GreaterOrEqual(t, i, 0)
	return kubevirtDomain[:i] + text + kubevirtDomain[i:]
}

func TestApply_ReplacesAStaleHostdevWithSameAlias_WhereItStands_RepeatsRemoved(t *testing.T) {
	// virt-launcher re-marshals our previous result through api.DomainSpec before the next call,
	// so our hostdev comes back in KubeVirt's field order, possibly between other devices, and
	// device-info may have changed meanwhile.
	stale := `
		<hostdev type="pci" managed="no" mode="subsystem">
			<source>
				<address type="pci" domain="0x0000" bus="0x99" slot="0x00" function="0x7"></address>
			</source>
			<alias name="ua-sriov-udn"></alias>
		</hostdev>`

	out, err := Apply([]byte(beforeDisk(t, stale+stale)), []model.BoundInterface{udnIface()})
	require.NoError(t, err)

	assert.Equal(t, beforeDisk(t, udnHostdev), string(out))
}

// readBackHostdev is our hostdev for udnIface without a VMI pciAddress, as KubeVirt's virt-launcher hands it
// to OnDefineDomain after reading the defined domain back from libvirt (#17605, KubeVirt main
// virtwrap/manager.go allocateHotplugPorts: util.GetDomainSpecWithFlags, then the hook Manager's
// xml.MarshalIndent of api.DomainSpec): KubeVirt's attribute order, the libvirt-assigned guest address.
// test/libvirt proves the same on the domain libvirt 11.3 itself returns.
const readBackHostdev = `
		<hostdev type="pci" managed="no" mode="subsystem">
			<source>
				<address type="pci" domain="0x0000" bus="0x65" slot="0x00" function="0x2"></address>
			</source>
			<boot order="2"></boot>
			<alias name="ua-sriov-udn"></alias>
			<address type="pci" domain="0x0000" bus="0x07" slot="0x00" function="0x0"></address>
		</hostdev>`

func udnIfaceWithoutPCIAddress() model.BoundInterface {
	iface := udnIface()
	iface.GuestPCIAddress = ""
	return iface
}

func TestApply_LibvirtReadBack_OurHostdevWithItsAssignedAddress_LeftByteForByte(t *testing.T) {
	for name, src := range map[string]string{
		"between other devices":   beforeDisk(t, readBackHostdev),
		"after the last device":   insertAfterLastDevice(t, kubevirtDomain, readBackHostdev),
		"with a libvirt <driver>": beforeDisk(t, strings.Replace(readBackHostdev, "\t\t\t<source>", "\t\t\t<driver name=\"vfio\"></driver>\n\t\t\t<source>", 1)),
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Apply([]byte(src), []model.BoundInterface{udnIfaceWithoutPCIAddress()})
			require.NoError(t, err)
			assert.Equal(t, src, string(out), "nothing changed: the address libvirt assigned stays")
		})
	}
}

func TestApply_StaleHostdevWithALibvirtAddress_ReplacedKeepingTheGuestAddress(t *testing.T) {
	iface := udnIfaceWithoutPCIAddress()
	cases := map[string]struct {
		edit func(*model.BoundInterface)
		want func(*libvirtxml.DomainHostdev)
	}{
		"another VF (device-info changed)": {
			edit: func(i *model.BoundInterface) { i.HostPCIAddress = "0000:65:00.3" },
			want: func(hd *libvirtxml.DomainHostdev) { *hd.SubsysPCI.Source.Address.Function = 3 },
		},
		"another boot order": {
			edit: func(i *model.BoundInterface) { order := uint(5); i.BootOrder = &order },
			want: func(hd *libvirtxml.DomainHostdev) { hd.Boot.Order = 5 },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			i := iface
			tc.edit(&i)
			out, err := Apply([]byte(beforeDisk(t, readBackHostdev)), []model.BoundInterface{i})
			require.NoError(t, err)
			got := hostdevByAlias(t, out, "ua-sriov-udn")
			require.Len(t, got, 1)
			want := hostdevByAlias(t, []byte(beforeDisk(t, readBackHostdev)), "ua-sriov-udn")[0]
			tc.want(&want)
			assert.Equal(t, want, got[0], "only what changed, at the guest address libvirt assigned")
			assert.Less(t, strings.Index(string(out), "ua-sriov-udn"), strings.Index(string(out), "<disk "), "where it stood")
		})
	}
	t.Run("the VMI now sets another pciAddress", func(t *testing.T) {
		out, err := Apply([]byte(beforeDisk(t, readBackHostdev)), []model.BoundInterface{udnIface()})
		require.NoError(t, err)
		assert.Equal(t, beforeDisk(t, udnHostdev), string(out), "the VMI's pciAddress wins over libvirt's")
	})
}

func TestApply_SkipsInterfaceKubeVirtWiredAsTap(t *testing.T) {
	// With domainAttachmentType tap, KubeVirt's converter emits <interface> alias ua-<name>
	// (pkg/virt-launcher/virtwrap/converter/network/configurator.go); adding a VF too would give
	// the guest two NICs. Device-info is irrelevant then, so an empty one is no error.
	tap := model.BoundInterface{Name: "default", Network: "default"}

	out, err := Apply([]byte(kubevirtDomain), []model.BoundInterface{tap, udnIface()})
	require.NoError(t, err)

	assert.Equal(t, insertAfterLastDevice(t, kubevirtDomain, udnHostdev), string(out))
	assert.Empty(t, hostdevByAlias(t, out, "ua-sriov-default"))
}

func TestApply_NothingToDo_ReturnsInputUnchanged(t *testing.T) {
	tests := map[string][]model.BoundInterface{
		"no bound interfaces":      nil,
		"only KubeVirt-wired ones": {{Name: "default"}},
	}
	for name, ifaces := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Apply([]byte(kubevirtDomain), ifaces)
			require.NoError(t, err)
			assert.Equal(t, kubevirtDomain, string(out))
		})
	}
}

func TestApply_GuestAddressAndBootOrder_OnlyWhenTheVMISetsThem(t *testing.T) {
	one := uint(1)
	tests := []struct {
		name      string
		guestPCI  string
		bootOrder *uint
		wantAddr  *libvirtxml.DomainAddressPCI
		wantBoot  *libvirtxml.DomainDeviceBoot
	}{
		{name: "neither"},
		{name: "pciAddress only", guestPCI: "0000:0a:1f.7", wantAddr: pciAddr(0, 0x0a, 0x1f, 7)},
		{name: "bootOrder only", bootOrder: &one, wantBoot: &libvirtxml.DomainDeviceBoot{Order: 1}},
		{
			name: "both, upper-case hex", guestPCI: "0000:AB:01.0", bootOrder: &one,
			wantAddr: pciAddr(0, 0xab, 1, 0), wantBoot: &libvirtxml.DomainDeviceBoot{Order: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iface := model.BoundInterface{
				Name: "udn", Network: "udn-net", HostPCIAddress: "0000:65:00.2",
				GuestPCIAddress: tt.guestPCI, BootOrder: tt.bootOrder,
			}
			out, err := Apply([]byte(kubevirtDomain), []model.BoundInterface{iface})
			require.NoError(t, err)

			got := hostdevByAlias(t, out, "ua-sriov-udn")
			require.Len(t, got, 1)
			hd := got[0]
			assert.Equal(t, "no", hd.Managed)
			require.NotNil(t, hd.SubsysPCI)
			require.NotNil(t, hd.SubsysPCI.Source)
			assert.Equal(t, pciAddr(0, 0x65, 0, 2), hd.SubsysPCI.Source.Address)
			assert.Equal(t, tt.wantBoot, hd.Boot)
			if tt.wantAddr == nil {
				assert.Nil(t, hd.Address)
			} else {
				require.NotNil(t, hd.Address)
				assert.Equal(t, tt.wantAddr, hd.Address.PCI)
			}
		})
	}
}

func pciAddr(domain, bus, slot, function uint) *libvirtxml.DomainAddressPCI {
	return &libvirtxml.DomainAddressPCI{Domain: &domain, Bus: &bus, Slot: &slot, Function: &function}
}

func TestApply_FollowsTheDocumentsLayout_AndStaysIdempotent(t *testing.T) {
	iface := model.BoundInterface{Name: "u", HostPCIAddress: "0000:65:00.2"}
	const hd = `<hostdev mode="subsystem" type="pci" managed="no">` +
		`<source><address domain="0x0000" bus="0x65" slot="0x00" function="0x2"></address></source>` +
		`<alias name="ua-sriov-u"></alias></hostdev>`
	spaced := func(indent, unit string) string {
		return indent + `<hostdev mode="subsystem" type="pci" managed="no">` + "\n" +
			indent + unit + "<source>\n" +
			indent + unit + unit + `<address domain="0x0000" bus="0x65" slot="0x00" function="0x2"></address>` + "\n" +
			indent + unit + "</source>\n" +
			indent + unit + `<alias name="ua-sriov-u"></alias>` + "\n" +
			indent + "</hostdev>"
	}
	tests := []struct{ name, in, want string }{
		{
			name: "compact",
			in:   `<domain><devices><disk></disk></devices></domain>`,
			want: `<domain><devices><disk></disk>` + hd + `</devices></domain>`,
		},
		{
			name: "self-closing devices, compact",
			in:   `<domain><devices/></domain>`,
			want: `<domain><devices>` + hd + `</devices></domain>`,
		},
		{
			name: "self-closing devices with a space, tabs",
			in:   "<domain>\n\t<devices />\n</domain>",
			want: "<domain>\n\t<devices >\n" + spaced("\t\t", "\t") + "\n\t</devices>\n</domain>",
		},
		{
			name: "empty devices, two spaces",
			in:   "<domain>\n  <devices></devices>\n</domain>",
			want: "<domain>\n  <devices>\n" + spaced("    ", "  ") + "\n  </devices>\n</domain>",
		},
		{
			name: "closing tag on the last device's line",
			in:   "<domain>\n  <devices>\n    <disk/></devices>\n</domain>",
			want: "<domain>\n  <devices>\n    <disk/>\n" + spaced("    ", "  ") + "\n  </devices>\n</domain>",
		},
		{
			name: "comment after the last device stays after our hostdev",
			in:   "<domain>\n\t<devices>\n\t\t<disk/>\n\t\t<!-- end -->\n\t</devices>\n</domain>",
			want: "<domain>\n\t<devices>\n\t\t<disk/>\n" + spaced("\t\t", "\t") + "\n\t\t<!-- end -->\n\t</devices>\n</domain>",
		},
		{
			name: "xml declaration and CRLF line ends",
			in:   "<?xml version=\"1.0\"?>\r\n<domain>\r\n  <devices>\r\n    <disk/>\r\n  </devices>\r\n</domain>\r\n",
			want: "<?xml version=\"1.0\"?>\r\n<domain>\r\n  <devices>\r\n    <disk/>\n" + spaced("    ", "  ") + "\r\n  </devices>\r\n</domain>\r\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ifaces := []model.BoundInterface{iface}
			out, err := Apply([]byte(tt.in), ifaces)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(out))

			again, err := Apply(out, ifaces)
			require.NoError(t, err)
			assert.Equal(t, string(out), string(again))
		})
	}
}

func TestApply_RejectsBadInput_WithAnErrorNamingIt(t *testing.T) {
	zero := uint(0)
	good := func(mutate func(*model.BoundInterface)) []model.BoundInterface {
		iface := udnIface()
		mutate(&iface)
		return []model.BoundInterface{iface}
	}
	tests := []struct {
		name     string
		xml      string
		ifaces   []model.BoundInterface
		wantErr  error
		wantText []string
	}{
		{
			name:    "missing device-info",
			ifaces:  good(func(i *model.BoundInterface) { i.HostPCIAddress, i.DeviceType = "", "" }),
			wantErr: ErrMissingDeviceInfo, wantText: []string{`"udn"`, `"udn-net"`},
		},
		{
			name: "vdpa", ifaces: good(func(i *model.BoundInterface) { i.DeviceType = "vdpa" }),
			wantErr: ErrUnsupportedDeviceType, wantText: []string{`"udn"`, `"udn-net"`, `"vdpa"`},
		},
		{
			name: "vhost-user without an address", ifaces: good(func(i *model.BoundInterface) { i.DeviceType, i.HostPCIAddress = "vhost-user", "" }),
			wantErr: ErrUnsupportedDeviceType, wantText: []string{`"vhost-user"`},
		},
		{
			name: "memif", ifaces: good(func(i *model.BoundInterface) { i.DeviceType = "memif" }),
			wantErr: ErrUnsupportedDeviceType, wantText: []string{`"memif"`},
		},
		{
			name: "host PCI address without domain", ifaces: good(func(i *model.BoundInterface) { i.HostPCIAddress = "65:00.2" }),
			wantErr: ErrInvalidPCIAddress, wantText: []string{"device-info pci-address", `"65:00.2"`, `"udn"`},
		},
		{
			name: "host PCI function 8", ifaces: good(func(i *model.BoundInterface) { i.HostPCIAddress = "0000:65:00.8" }),
			wantErr: ErrInvalidPCIAddress, wantText: []string{`"0000:65:00.8"`},
		},
		{
			name: "host PCI slot above 0x1f", ifaces: good(func(i *model.BoundInterface) { i.HostPCIAddress = "0000:65:20.0" }),
			wantErr: ErrInvalidPCIAddress, wantText: []string{"slot 0x20"},
		},
		{
			name: "host PCI with trailing newline", ifaces: good(func(i *model.BoundInterface) { i.HostPCIAddress = "0000:65:00.2\n" }),
			wantErr: ErrInvalidPCIAddress,
		},
		{
			name: "guest pciAddress with an XML payload", ifaces: good(func(i *model.BoundInterface) { i.GuestPCIAddress = `0000:81:01.0"/><x a="` }),
			wantErr: ErrInvalidPCIAddress, wantText: []string{"VMI pciAddress"},
		},
		{
			name: "bootOrder 0", ifaces: good(func(i *model.BoundInterface) { i.BootOrder = &zero }),
			wantErr: ErrInvalidInterface, wantText: []string{"bootOrder 0"},
		},
		{
			name: "empty interface name", ifaces: good(func(i *model.BoundInterface) { i.Name = "" }),
			wantErr: ErrInvalidInterface, wantText: []string{`"udn-net"`},
		},
		{
			name: "interface name with a control character", ifaces: good(func(i *model.BoundInterface) { i.Name = "u\x00dn" }),
			wantErr: ErrInvalidInterface, wantText: []string{`"u\x00dn"`},
		},
		{
			name: "interface name with a quote", ifaces: good(func(i *model.BoundInterface) { i.Name = `u"dn` }),
			wantErr: ErrInvalidInterface,
		},
		{
			name: "interface listed twice", ifaces: append(good(func(*model.BoundInterface) {}), udnIface()),
			wantErr: ErrInvalidInterface, wantText: []string{"twice"},
		},
		{
			name: "two interfaces on one VF",
			ifaces: append(good(func(*model.BoundInterface) {}),
				model.BoundInterface{Name: "other", HostPCIAddress: "0000:65:00.2"}),
			wantErr: ErrInvalidInterface, wantText: []string{`"udn"`, `"other"`, `"0000:65:00.2"`},
		},
		{
			name:   "another kind of device holds our alias",
			xml:    "<domain><devices><interface><alias name=\"ua-sriov-udn\"/></interface></devices></domain>",
			ifaces: good(func(*model.BoundInterface) {}), wantErr: ErrAliasConflict, wantText: []string{"<interface>"},
		},
		{name: "empty document", xml: " ", wantErr: ErrMalformedDomain, wantText: []string{"no <domain>"}},
		{name: "not XML", xml: "{}", wantErr: ErrMalformedDomain},
		{name: "wrong root", xml: "<domainCapabilities/>", wantErr: ErrMalformedDomain, wantText: []string{"<domainCapabilities>"}},
		{name: "namespaced root", xml: `<domain xmlns="urn:x"><devices/></domain>`, wantErr: ErrMalformedDomain},
		{name: "two roots", xml: "<domain><devices/></domain><domain/>", wantErr: ErrMalformedDomain, wantText: []string{"second root"}},
		{name: "unclosed", xml: "<domain><devices>", wantErr: ErrMalformedDomain},
		{name: "mismatched end tag", xml: "<domain><devices></domain></devices>", wantErr: ErrMalformedDomain},
		{name: "text after root", xml: "<domain><devices/></domain>junk", wantErr: ErrMalformedDomain, wantText: []string{"text outside"}},
		{name: "doctype", xml: "<!DOCTYPE domain [<!ENTITY x \"y\">]><domain><devices/></domain>", wantErr: ErrMalformedDomain, wantText: []string{"directive"}},
		{name: "undefined entity", xml: "<domain><name>&x;</name><devices/></domain>", wantErr: ErrMalformedDomain},
		{name: "two devices elements", xml: "<domain><devices/><devices/></domain>", wantErr: ErrMalformedDomain, wantText: []string{"second <devices>"}},
		{name: "non-UTF-8 encoding", xml: `<?xml version="1.0" encoding="ISO-8859-1"?><domain><devices/></domain>`, wantErr: ErrMalformedDomain},
		{
			name: "no devices element", xml: "<domain><name>x</name></domain>", ifaces: good(func(*model.BoundInterface) {}),
			wantErr: ErrMalformedDomain, wantText: []string{"no <devices>", `"udn"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.xml
			if src == "" {
				src = kubevirtDomain
			}
			out, err := Apply([]byte(src), tt.ifaces)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.wantErr)
			for _, text := range tt.wantText {
				assert.Contains(t, err.Error(), text)
			}
			assert.Nil(t, out)
		})
	}
}

func wiredByKubeVirt(domainXML, ifaceName string) (bool, error) {
	doc, err := Parse(context.Background(), []byte(domainXML))
	if err != nil {
		return false, err
	}
	return doc.WiredByKubeVirt(ifaceName)
}

func TestWiredByKubeVirt(t *testing.T) {
	tests := []struct {
		name, xml, iface string
		want             bool
	}{
		{name: "interface with ua-<name>", xml: kubevirtDomain, iface: "default", want: true},
		{name: "no such interface", xml: kubevirtDomain, iface: "udn"},
		{name: "our hostdev is not KubeVirt's wiring", xml: kubevirtDomain, iface: "sriov-core"},
		{name: "prefix only", xml: kubevirtDomain, iface: "defaul"},
		{
			name:  "alias outside <devices>",
			xml:   `<domain><metadata><interface><alias name="ua-udn"/></interface></metadata><devices/></domain>`,
			iface: "udn",
		},
		{
			name:  "alias nested below a device",
			xml:   `<domain><devices><hub><interface><alias name="ua-udn"/></interface></hub></devices></domain>`,
			iface: "udn",
		},
		{
			name:  "namespaced interface",
			xml:   `<domain xmlns:x="urn:x"><devices><x:interface><alias name="ua-udn"/></x:interface></devices></domain>`,
			iface: "udn",
		},
		{name: "no devices", xml: `<domain/>`, iface: "udn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wiredByKubeVirt(tt.xml, tt.iface)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestWiredByKubeVirt_Errors(t *testing.T) {
	_, err := wiredByKubeVirt("<domain>", "udn")
	assert.ErrorIs(t, err, ErrMalformedDomain)
	_, err = wiredByKubeVirt(kubevirtDomain, "a b")
	assert.ErrorIs(t, err, ErrInvalidInterface)
}

func TestApply_PassesThroughQemuPrefixWithoutDeclaration_AsVirtLauncherResendsIt(t *testing.T) {
	// virt-launcher re-reads a hook's result into api.DomainSpec, which loses the root's
	// xmlns:qemu, so from the second OnDefineDomain on <qemu:commandline> can arrive undeclared.
	src := strings.Replace(kubevirtDomain, ` xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"`, "", 1)
	require.NotEqual(t, kubevirtDomain, src)

	out, err := Apply([]byte(src), []model.BoundInterface{udnIface()})
	require.NoError(t, err)
	assert.Equal(t, insertAfterLastDevice(t, src, udnHostdev), string(out))
}

func TestApply_KubeVirtWiredInterface_ItsHostdevAliasIsNotTouchedEither(t *testing.T) {
	// Only hostdevs of interfaces we wire are ours to replace; "default" is KubeVirt's NIC.
	stale := "\n\t\t<hostdev type=\"pci\"><alias name=\"ua-sriov-default\"></alias></hostdev>"
	src := insertAfterLastDevice(t, kubevirtDomain, stale)

	out, err := Apply([]byte(src), []model.BoundInterface{{Name: "default"}, udnIface()})
	require.NoError(t, err)
	assert.Equal(t, insertAfterLastDevice(t, src, udnHostdev), string(out))
}
