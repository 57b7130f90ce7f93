package guest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostdevElements_ReturnsEachHostdevByteForByte(t *testing.T) {
	hd := "<hostdev mode=\"subsystem\" type=\"pci\" managed=\"no\">\n\t<source>\n\t\t<address domain=\"0x0000\" bus=\"0x01\" slot=\"0x10\" function=\"0x0\"></address>\n\t</source>\n\t<alias name=\"ua-sriov-l2sec\"></alias>\n</hostdev>"
	tests := []struct {
		name string
		dom  string
		want []string
	}{
		{"none", "<domain><devices><interface type='ethernet'/></devices></domain>", nil},
		{"one", "<domain><devices><interface/>" + hd + "</devices></domain>", []string{hd}},
		{"two", "<domain><devices>" + hd + "<disk/>" + hd + "</devices></domain>", []string{hd, hd}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hostdevElements([]byte(tc.dom))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := hostdevElements([]byte("<domain><devices><hostdev>"))
	assert.ErrorContains(t, err, "<hostdev>", "a truncated domain is an error naming the element")
}

func TestStaticAddrsForMAC_TakesTheNICsStaticAddressesFromNoCloudV1(t *testing.T) {
	v1 := `version: 1
config:
  - type: physical
    name: l2sec
    mac_address: "02:00:00:0a:00:05"
    subnets:
      - {type: static, address: 10.200.0.5/24}
      - {type: static6, address: "fd10:200::5/64"}
  - type: physical
    mac_address: "02:00:00:00:00:01"
    subnets: [{type: dhcp}]
`
	got, err := staticAddrsForMAC(v1, "02:00:00:0A:00:05")
	require.NoError(t, err)
	assert.Equal(t, []string{"10.200.0.5/24", "fd10:200::5/64"}, got)
	got, err = staticAddrsForMAC("network:\n"+indent(v1), "02:00:00:0a:00:05")
	require.NoError(t, err)
	assert.Len(t, got, 2, "the same under a network: key")
	_, err = staticAddrsForMAC(v1, "02:00:00:00:00:01")
	assert.ErrorContains(t, err, "no static address for MAC 02:00:00:00:00:01")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

func TestVFIOReport_LayersAndNestedLines(t *testing.T) {
	lines := []string{
		"@@vfio iommu ok: 5 IOMMU groups",
		"@@vfio-note libvirt-start: the first start failed (no return within 300 s) [node uptime 330.1 s]",
		"@@vfio libvirt-start FAILED: error: Failed to start domain 'nested'",
		"@@log /run/libvirtd.log: error",
		"@@nested [    1.0] random kernel line",
		"@@nested @@nested-nic eth0 driver=igbvf mac=02:00:00:0a:00:05 pci=0000:01:00.0",
		"@@nested @@nested-ping 10.200.0.1 ok",
		"@@nested @@nested-ping fd10:200::1 FAILED",
	}
	assert.Equal(t, map[string]string{"iommu": "ok: 5 IOMMU groups", "libvirt-start": "FAILED: error: Failed to start domain 'nested'"}, vfioLayers(lines))
	assert.Equal(t, map[string][]string{
		"nic":  {"eth0 driver=igbvf mac=02:00:00:0a:00:05 pci=0000:01:00.0"},
		"ping": {"10.200.0.1 ok", "fd10:200::1 FAILED"},
	}, nestedLines(lines))
}

func TestNestedDomainXML_SidecarHostdevUnchangedAndCmdlineEscaped(t *testing.T) {
	hd := "<hostdev mode=\"subsystem\" type=\"pci\" managed=\"no\"><alias name=\"ua-sriov-l2sec\"></alias></hostdev>"
	x := nestedDomainXML([]string{hd}, "a=1 b=<2>")
	assert.Contains(t, x, "    "+hd+"\n")
	assert.Contains(t, x, "<cmdline>a=1 b=&lt;2&gt;</cmdline>")
	assert.Contains(t, x, "<domain type='qemu'>", "TCG: the node has no KVM")
}

func TestVFIONodeQemuArgs_VirtualIOMMUBeforeThePF(t *testing.T) {
	n := vfioNode{Image: VFIONodeImage{Kernel: "vmlinuz", Initrd: "initrd.img"}, PFMAC: "52:54:00:a0:00:00", PFTap: "pf0", Memory: "1536"}
	args := strings.Join(n.QemuArgs(), " ")
	assert.Contains(t, args, "-machine q35,kernel-irqchip=split")
	assert.Contains(t, args, "intel_iommu=on")
	iommu, pf := strings.Index(args, "intel-iommu,intremap=on,caching-mode=on"), strings.Index(args, "-device igb,")
	require.True(t, iommu >= 0 && pf >= 0, args)
	assert.Less(t, iommu, pf, "the virtual IOMMU comes before the PCI devices it translates for")
	assert.Contains(t, args, "file=/mnt/image/node.img,format=raw,if=virtio,snapshot=on", "the cached node image is never written")
}
