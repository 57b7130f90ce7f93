package libvirtcheck

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kubevirtDevices = `<domain type="kvm"><name>d</name><devices>
<interface type="ethernet"><alias name="ua-default"></alias></interface>
<hostdev type="pci" managed="no"><alias name="ua-sriov-core"></alias></hostdev>
<disk type="file"><alias name="ua-disk"></alias></disk>
</devices><metadata><hostdev>not a device</hostdev></metadata></domain>`

func TestDevicesOf_OnlyInterfacesAndHostdevsUnderDevices(t *testing.T) {
	got, err := DevicesOf([]byte(kubevirtDevices))
	require.NoError(t, err)
	assert.Equal(t, []string{
		`<interface type="ethernet"><alias name="ua-default"></alias></interface>`,
		`<hostdev type="pci" managed="no"><alias name="ua-sriov-core"></alias></hostdev>`,
	}, texts(got))
}

func TestDevicesOf_BrokenXML_ErrorSaysWhere(t *testing.T) {
	_, err := DevicesOf([]byte(`<domain><devices><hostdev>`))
	require.Error(t, err)
	_, err = DevicesOf([]byte(`<domain><devices></hostdev>`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read domain XML at byte")
}

func TestChangedDevices_WhatTheHookAddedOrChanged(t *testing.T) {
	ours := `<hostdev mode="subsystem" type="pci" managed="no"><alias name="ua-sriov-udn"></alias></hostdev>`
	tests := []struct {
		name   string
		after  string
		change []string
	}{
		{"nothing", kubevirtDevices, nil},
		{"a hostdev added", strings.Replace(kubevirtDevices, "<disk", ours+"<disk", 1), []string{ours}},
		{"the pod NIC's MAC set", strings.Replace(kubevirtDevices, `<alias name="ua-default">`, `<mac address="02:00:00:00:00:01"></mac><alias name="ua-default">`, 1),
			[]string{`<interface type="ethernet"><mac address="02:00:00:00:00:01"></mac><alias name="ua-default"></alias></interface>`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChangedDevices([]byte(kubevirtDevices), []byte(tc.after))
			require.NoError(t, err)
			assert.Equal(t, tc.change, texts(got))
		})
	}
}

func TestForThisLibvirt_EmulatorAndMachineOfTheToolsRoot(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"no emulator", `<domain><memory unit="b">1</memory><os><type machine="q35">hvm</type></os><devices><disk/></devices></domain>`,
			`<domain><memory unit="b">1</memory><os><type machine="q35">hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator><disk/></devices></domain>`},
		{"KubeVirt's emulator and RHEL machine", `<domain><memory>1</memory><os><type machine="pc-q35-rhel9.6.0">hvm</type></os><devices><emulator>/usr/libexec/qemu-kvm</emulator></devices></domain>`,
			`<domain><memory>1</memory><os><type machine="q35">hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>`},
		{"a fixture's empty memory and os", "<domain><memory unit=\"\">0</memory><os>\n\t<type></type>\n</os><devices></devices></domain>",
			`<domain><memory unit='MiB'>128</memory><os><type arch='x86_64' machine='q35'>hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>`},
		{"a fixture with devices only", `<domain><name>n</name><devices></devices></domain>`,
			`<domain><name>n</name><memory unit='MiB'>128</memory><os><type arch='x86_64' machine='q35'>hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(ForThisLibvirt([]byte(tc.in))))
		})
	}
}

func texts(b [][]byte) []string {
	var out []string
	for _, x := range b {
		out = append(out, string(x))
	}
	return out
}

func TestWithVirtType_RootTypeOnly(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"KubeVirt's root with a namespace", `<domain type="kvm" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"><name>d</name><devices><interface type="ethernet"/></devices></domain>`,
			`<domain type="qemu" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"><name>d</name><devices><interface type="ethernet"/></devices></domain>`},
		{"single quotes after an XML declaration", "<?xml version='1.0'?>\n<domain type='kvm'>\n  <name>schema-check</name></domain>",
			"<?xml version='1.0'?>\n<domain type='qemu'>\n  <name>schema-check</name></domain>"},
		{"type after another attribute", `<domain id="3" type="kvm"><name>d</name></domain>`, `<domain id="3" type="qemu"><name>d</name></domain>`},
		{"no type on the root: a device's type stays", `<domain><devices><hostdev type="pci"/></devices></domain>`,
			`<domain><devices><hostdev type="pci"/></devices></domain>`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(WithVirtType([]byte(tc.in), "qemu")))
		})
	}
}
