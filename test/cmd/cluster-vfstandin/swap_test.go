package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/network/downwardapi"
	"kubevirt.io/kubevirt/pkg/network/namescheme"
	"libvirt.org/go/libvirtxml"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// The hostdevs our sidecar writes for the samples' two bound interfaces (cmd/sidecar/samples: sriov-l2 on
// VF 0000:65:00.2 with pciAddress 0000:07:00.0, sriov-localnet on 0000:65:00.5), beside a hostdev of the
// user's and KubeVirt's own pod NIC.
const (
	l2Hostdev       = `<hostdev mode="subsystem" type="pci" managed="no"><source><address domain="0x0000" bus="0x65" slot="0x00" function="0x2"></address></source><alias name="ua-sriov-sriov-l2"></alias><address type="pci" domain="0x0000" bus="0x07" slot="0x00" function="0x0"></address></hostdev>`
	localnetHostdev = `<hostdev mode="subsystem" type="pci" managed="no"><source><address domain="0x0000" bus="0x65" slot="0x00" function="0x5"></address></source><alias name="ua-sriov-sriov-localnet"></alias></hostdev>`
	userHostdev     = `<hostdev mode="subsystem" type="pci" managed="yes"><source><address domain="0x0000" bus="0x81" slot="0x00" function="0x0"></address></source><alias name="ua-gpu"></alias></hostdev>`
)

func domainWith(hostdevs ...string) string {
	return "<domain type=\"kvm\">\n  <name>ns1_vm1</name>\n  <devices>\n    <interface type=\"ethernet\"><alias name=\"ua-default\"></alias></interface>\n    " +
		strings.Join(hostdevs, "\n    ") + "\n  </devices>\n</domain>\n"
}

func samples(t *testing.T) (*v1.VirtualMachineInstance, downwardapi.NetworkInfo) {
	t.Helper()
	pod, vmi := harness.LoadSamples(t)
	var ni downwardapi.NetworkInfo
	require.NoError(t, json.Unmarshal([]byte(pod.Metadata.Annotations[downwardapi.NetworkInfoAnnot]), &ni))
	return vmi, ni
}

// The emulated NIC's alias is one no VMI interface has, so that the domain holds no <interface> of the bound
// interface, as on a node where the VF stays a <hostdev>; a VMI labelled AliasLabel=AliasKubeVirt gets KubeVirt's own.
func TestSwap_OurHostdevsBecomeEmulatedNICsOnTheStandInTaps(t *testing.T) {
	for _, tc := range []struct {
		label       string
		aliasPrefix string
	}{
		{"", "ua-vfstandin-"},
		{AliasKubeVirt, "ua-"},
	} {
		t.Run("label "+tc.label, func(t *testing.T) {
			vmi, ni := samples(t)
			if tc.label != "" {
				vmi.Labels = map[string]string{AliasLabel: tc.label}
			}
			swapsOurHostdevs(t, vmi, ni, tc.aliasPrefix)
		})
	}
}

func swapsOurHostdevs(t *testing.T, vmi *v1.VirtualMachineInstance, ni downwardapi.NetworkInfo, aliasPrefix string) {
	in := domainWith(l2Hostdev, localnetHostdev, userHostdev)
	out, err := Swap([]byte(in), vmi, ni, "sriov-udn")
	require.NoError(t, err)

	var dom libvirtxml.Domain
	require.NoError(t, dom.Unmarshal(string(out)))
	require.Len(t, dom.Devices.Hostdevs, 1, "only the user's hostdev is left")
	assert.Equal(t, "ua-gpu", dom.Devices.Hostdevs[0].Alias.Name)
	require.Len(t, dom.Devices.Interfaces, 3)
	assert.Equal(t, "ua-default", dom.Devices.Interfaces[0].Alias.Name, "KubeVirt's own NIC is untouched")

	want := map[string]struct{ mac, guest string }{
		"sriov-l2":       {"02:00:00:aa:01:01", "0000:07:00.0"}, // spec macAddress, the hostdev's guest address kept
		"sriov-localnet": {"02:00:00:aa:02:01", ""},             // no macAddress in spec: device-info's mac
	}
	for _, nic := range dom.Devices.Interfaces[1:] {
		name, ok := strings.CutPrefix(nic.Alias.Name, aliasPrefix)
		require.True(t, ok, "NIC alias %q, want the prefix %q", nic.Alias.Name, aliasPrefix)
		w, ok := want[name]
		require.True(t, ok, "unexpected NIC alias %q", nic.Alias.Name)
		require.NotNil(t, nic.Source.Ethernet, "%s: type='ethernet'", name)
		assert.Equal(t, TapName(namescheme.GenerateHashedInterfaceName(name)), nic.Target.Dev, name)
		assert.Equal(t, "no", nic.Target.Managed, "%s: the CNI stand-in made the TAP", name)
		assert.Equal(t, w.mac, nic.MAC.Address, name)
		assert.Equal(t, "virtio", nic.Model.Type, name)
		if w.guest == "" {
			assert.Nil(t, nic.Address, "%s: no guest address to keep", name)
		} else {
			require.NotNil(t, nic.Address, name)
			assert.Equal(t, w.guest, pciString(nic.Address.PCI), name)
		}
	}
	// Nothing else moved: the bytes before the first hostdev and after the last one are the input's.
	assert.True(t, strings.HasPrefix(string(out), in[:strings.Index(in, "<hostdev")]))
	assert.True(t, strings.HasSuffix(string(out), userHostdev+"\n  </devices>\n</domain>\n"))
}

// virt-launcher defines the domain again from what it holds (the stand-in's NIC in it) and our sidecar wires the
// VF again: the hostdev goes, and the NIC stays the one there is (libvirt refuses two devices of one alias).
func TestSwap_AgainOnItsOwnOutputWithOurHostdevAdded_OneNICPerVF(t *testing.T) {
	vmi, ni := samples(t)
	first, err := Swap([]byte(domainWith(l2Hostdev, localnetHostdev)), vmi, ni, "sriov-udn")
	require.NoError(t, err)
	again := strings.Replace(string(first), "</devices>", l2Hostdev+localnetHostdev+"</devices>", 1)
	second, err := Swap([]byte(again), vmi, ni, "sriov-udn")
	require.NoError(t, err)
	var dom libvirtxml.Domain
	require.NoError(t, dom.Unmarshal(string(second)))
	assert.Empty(t, dom.Devices.Hostdevs)
	require.Len(t, dom.Devices.Interfaces, 3, "ua-default and one NIC per VF")
	assert.Equal(t, 1, strings.Count(string(second), `"`+nicAliasPrefix+`sriov-l2"`))
	wrong := strings.Replace(string(first), "</devices>", strings.Replace(l2Hostdev, `managed="no"`, `managed="yes"`, 1)+localnetHostdev+"</devices>", 1)
	_, err = Swap([]byte(wrong), vmi, ni, "sriov-udn")
	require.ErrorIs(t, err, ErrHostdev, "the hostdev is checked on every call")
}

// virt-launcher defines the domain it read back, the stand-in's NICs in it, and our sidecar adds no hostdev for an
// interface that has an <interface> aliased ua-<name>: the stand-in leaves the domain as it is.
func TestSwap_ItsOwnNICsAndNoHostdev_Unchanged(t *testing.T) {
	vmi, ni := samples(t)
	first, err := Swap([]byte(domainWith(l2Hostdev, localnetHostdev)), vmi, ni, "sriov-udn")
	require.NoError(t, err)
	again, err := Swap(first, vmi, ni, "sriov-udn")
	require.NoError(t, err)
	assert.Equal(t, string(first), string(again))
}

func TestTapName_IsTheCNIStandInsNameUnderIFNAMSIZ(t *testing.T) {
	// Computed apart from the code: echo -n pod81b1f0e9d06 | sha256sum | cut -c1-11
	assert.Equal(t, "vfcfde6ed39ab", TapName("pod81b1f0e9d06"))
	assert.LessOrEqual(t, len(TapName("pod81b1f0e9d06")), 15, "IFNAMSIZ is 16 with the NUL")
}

// Each deliberately wrong hostdev is refused with an error naming what is wrong: the VM would then fail to
// start, instead of the stand-in hiding a hostdev that a real VF would not accept.
func TestSwap_WrongHostdev_RefusedNamingTheField(t *testing.T) {
	replace := func(old, repl string) string { return strings.Replace(l2Hostdev, old, repl, 1) }
	cases := []struct {
		name    string
		l2      []string // the hostdevs in place of ours for sriov-l2
		want    []string
		wantErr error
	}{
		{"source address of another VF", []string{replace(`function="0x2"`, `function="0x3"`)},
			[]string{`"ua-sriov-sriov-l2"`, `source address "0000:65:00.3", want the device-info pci-address "0000:65:00.2"`}, ErrHostdev},
		{"managed by libvirt", []string{replace(`managed="no"`, `managed="yes"`)}, []string{`managed="yes", want "no"`}, ErrHostdev},
		{"managed unset", []string{replace(` managed="no"`, ``)}, []string{`managed="", want "no"`}, ErrHostdev},
		{"capabilities mode, not a PCI subsystem device", []string{`<hostdev mode="capabilities" type="net"><source><interface>eth9</interface></source><alias name="ua-sriov-sriov-l2"></alias></hostdev>`},
			[]string{"not type='pci' in mode='subsystem'"}, ErrHostdev},
		{"guest address not the VMI's pciAddress", []string{replace(`bus="0x07"`, `bus="0x08"`)},
			[]string{`guest address "0000:08:00.0", want the VMI's pciAddress "0000:07:00.0"`}, ErrHostdev},
		{"boot order the VMI did not ask for", []string{replace(`</source>`, `</source><boot order="1"></boot>`)},
			[]string{"boot order 1, but the VMI's interface sets no bootOrder"}, ErrHostdev},
		{"alias without our prefix", []string{replace(`ua-sriov-sriov-l2`, `ua-sriov-l2`)},
			[]string{`"ua-sriov-sriov-l2" for interface "sriov-l2": absent from the domain`}, ErrHostdev},
		{"absent", nil, []string{"absent from the domain", "ran after this stand-in"}, ErrHostdev},
		{"duplicated", []string{l2Hostdev, l2Hostdev}, []string{"2 of them in the domain, want one"}, ErrHostdev},
		{"two things wrong at once", []string{strings.NewReplacer(`managed="no"`, `managed="yes"`, `function="0x2"`, `function="0x4"`).Replace(l2Hostdev)},
			[]string{`source address "0000:65:00.4"`, `; managed="yes"`}, ErrHostdev},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi, ni := samples(t)
			doc := domainWith(append(tc.l2, localnetHostdev)...)
			_, err := Swap([]byte(doc), vmi, ni, "sriov-udn")
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.wantErr), "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestSwap_BadInputs_ErrorNamesTheInput(t *testing.T) {
	cases := []struct {
		name   string
		adjust func(*v1.VirtualMachineInstance, *downwardapi.NetworkInfo)
		doc    string
		want   string
	}{
		{"no device-info entry for the network", func(_ *v1.VirtualMachineInstance, ni *downwardapi.NetworkInfo) { ni.Interfaces = ni.Interfaces[1:] },
			"", `interface "sriov-l2": device-info has no PCI address for network "sriov-l2"`},
		{"device-info of another type", func(_ *v1.VirtualMachineInstance, ni *downwardapi.NetworkInfo) {
			ni.Interfaces[0].DeviceInfo.Type = "vdpa"
		},
			"", `device-info type "vdpa", want "pci"`},
		{"no MAC anywhere", func(vmi *v1.VirtualMachineInstance, ni *downwardapi.NetworkInfo) {
			vmi.Spec.Domain.Devices.Interfaces[2].MacAddress = ""
			ni.Interfaces[1].Mac = ""
		}, "", `interface "sriov-localnet": no MAC`},
		{"bound interface on the pod network", func(vmi *v1.VirtualMachineInstance, _ *downwardapi.NetworkInfo) {
			vmi.Spec.Networks[1] = v1.Network{Name: "sriov-l2", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}
		}, "", `interface "sriov-l2" (binding "sriov-udn"): no secondary Multus network`},
		{"truncated domain XML", nil, domainWith(l2Hostdev, localnetHostdev)[:90], "domain XML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi, ni := samples(t)
			if tc.adjust != nil {
				tc.adjust(vmi, &ni)
			}
			doc := tc.doc
			if doc == "" {
				doc = domainWith(l2Hostdev, localnetHostdev)
			}
			_, err := Swap([]byte(doc), vmi, ni, "sriov-udn")
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInput), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestSwap_NoInterfaceOfTheBinding_DomainUnchanged(t *testing.T) {
	vmi, ni := samples(t)
	doc := []byte(domainWith(userHostdev))
	out, err := Swap(doc, vmi, ni, "some-other-binding")
	require.NoError(t, err)
	assert.Equal(t, string(doc), string(out))
}

// The stand-in parses hostile bytes (any domain XML virt-launcher could send) without panicking, and when it
// accepts a domain, none of our hostdevs is left in what it returns.
func FuzzSwap(f *testing.F) {
	f.Add([]byte(domainWith(l2Hostdev, localnetHostdev, userHostdev)))
	f.Add([]byte(domainWith(l2Hostdev, l2Hostdev)))
	f.Add([]byte("<domain><devices><hostdev><alias name=\"ua-sriov-sriov-l2\"/></hostdev></devices></domain>"))
	f.Add([]byte("<domain><devices><devices><hostdev/></devices></devices></domain>"))
	pod, vmi := harness.LoadSamples(f)
	var ni downwardapi.NetworkInfo
	if err := json.Unmarshal([]byte(pod.Metadata.Annotations[downwardapi.NetworkInfoAnnot]), &ni); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := Swap(doc, vmi, ni, "sriov-udn")
		if err != nil {
			return
		}
		left, err := findHostdevs(out)
		if err != nil {
			t.Fatalf("Swap accepted %q but its output does not parse: %v", doc, err)
		}
		for _, h := range left {
			if h.element == "hostdev" && strings.HasPrefix(h.alias, hostdevAliasPrefix+"sriov-") {
				t.Fatalf("Swap accepted %q but left hostdev %q in %q", doc, h.alias, out)
			}
		}
	})
}
