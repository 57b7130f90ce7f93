package guest

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"kubevirt.io/kubevirt/pkg/network/namescheme"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

func TestImageSpecKey_ChangesWithContentNotPackageOrder(t *testing.T) {
	base := DefaultImageSpec()
	reordered := base
	reordered.Packages = append([]string(nil), base.Packages...)
	reordered.Packages[0], reordered.Packages[1] = reordered.Packages[1], reordered.Packages[0]
	assert.Equal(t, base.Key(), reordered.Key(), "package order does not change the image")

	tests := map[string]func(*ImageSpec){
		"package added":   func(s *ImageSpec) { s.Packages = append(append([]string(nil), s.Packages...), "isc-dhcp-client") },
		"suite":           func(s *ImageSpec) { s.Suite = "trixie" },
		"mirror":          func(s *ImageSpec) { s.Mirror = "http://mirror.example/debian" },
		"cloud-init conf": func(s *ImageSpec) { s.CloudCfg += "# changed\n" },
		"size":            func(s *ImageSpec) { s.SizeMiB++ },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			s := base
			change(&s)
			assert.NotEqual(t, base.Key(), s.Key())
		})
	}
}

func TestQemuArgs_OneRestrictedNICPerMACAndNoKernelDatasourceHint(t *testing.T) {
	macs := []net.HardwareAddr{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0xa, 0, 5}}
	b := Boot{Image: imageIn("/cache/k"), ISO: "/x/noCloud.iso", NICs: macs, ConsoleLog: "/x/console.log"}
	args := strings.Join(b.QemuArgs(), " ")

	assert.Contains(t, args, "-accel tcg")
	assert.Contains(t, args, "-netdev user,id=nic0,restrict=on,ipv6=off -device virtio-net-pci,netdev=nic0,mac=02:00:00:00:00:01")
	assert.Contains(t, args, "-netdev user,id=nic1,restrict=on,ipv6=off -device virtio-net-pci,netdev=nic1,mac=02:00:00:0a:00:05")
	assert.Equal(t, 2, strings.Count(args, "-netdev "))
	assert.Contains(t, args, "file=/cache/k/root.img,format=raw,if=virtio,snapshot=on", "the cached image is never written")
	assert.Contains(t, args, "file=/x/noCloud.iso,format=raw,if=virtio,readonly=on")
	assert.Contains(t, args, "-append root=/dev/vda rw console=ttyS0 no_timer_check ")
	assert.Contains(t, args, " norandmaps", "TCG reuses its translations only when libraries keep their addresses")
	assert.NotContains(t, args, "ds=", "cloud-init must find the datasource by ISO label, as in KubeVirt")
	assert.True(t, strings.HasSuffix(args, "-serial file:/x/console.log -serial stdio"), "ttyS1 carries the report on stdout")
}

func TestHashedPodIface_EqualsKubeVirtNameScheme(t *testing.T) {
	for _, network := range []string{"l2sec", "udn", "dhcpnet", "a-much-longer-network-name"} {
		assert.Equal(t, namescheme.GenerateHashedInterfaceName(network), hashedPodIface(network))
	}
}

func TestPodAnnotations_AreWhatOVNKAndMultusWrite(t *testing.T) {
	vmi := newVMI("vm1", []vmiIface{podNIC, secondary}, cloudInitVolume{UserData: "#cloud-config\n"})
	ann, err := podAnnotations(vmi, "primary", []attachment{secondaryL2})
	require.NoError(t, err)

	podNetworks, err := ovn.Decode(ann[ovn.PodNetworksAnnotation])
	require.NoError(t, err)
	assert.Equal(t, []string{"10.200.0.5/24", "fd10:200::5/64"}, podNetworks[secondaryNAD].IPAddresses)
	assert.Equal(t, "primary", podNetworks["default"].Role)

	var statuses []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ann["k8s.v1.cni.cncf.io/network-status"]), &statuses))
	require.Len(t, statuses, 2)
	assert.Equal(t, secondaryNAD, statuses[1]["name"])
	assert.Equal(t, namescheme.GenerateHashedInterfaceName("l2sec"), statuses[1]["interface"])
	assert.Equal(t, map[string]any{"type": "pci", "version": "1.1.0", "pci": map[string]any{"pci-address": "0000:65:00.2"}}, statuses[1]["device-info"])

	assert.JSONEq(t, `{"interfaces":[{"network":"l2sec","mac":"02:00:00:0a:00:05","deviceInfo":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2"}}}]}`,
		ann["kubevirt.io/network-info"])

	require.Len(t, vmi.Spec.Networks, 2)
	assert.NotNil(t, vmi.Spec.Networks[0].Pod)
	assert.Equal(t, secondaryNAD, vmi.Spec.Networks[1].Multus.NetworkName)
	assert.Equal(t, bindingName, vmi.Spec.Domain.Devices.Interfaces[1].Binding.Name)
}

func TestImage_RunsTheReportAfterCloudInitsFinalStage_OnEveryBoot(t *testing.T) {
	spec := DefaultImageSpec()
	assert.Equal(t, reportScript, spec.Files["usr/local/sbin/guest-report"])
	assert.Equal(t, reportUnit, spec.Files["etc/systemd/system/guest-report.service"])
	assert.Contains(t, reportUnit, "After=cloud-final.service")
	assert.Equal(t, "/etc/systemd/system/guest-report.service", spec.Links["etc/systemd/system/multi-user.target.wants/guest-report.service"])
	other := spec
	other.Files = map[string]string{"usr/local/sbin/guest-report": reportScript + "#"}
	assert.NotEqual(t, spec.Key(), other.Key(), "a changed file makes a new image")
}

func TestUserDataFormats_LeaveATraceOfEachPieceOfUserWork(t *testing.T) {
	cc, err := cloudConfigUserData("runcmd")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cc, "#cloud-config\n"))
	var doc struct {
		Runcmd [][]string `yaml:"runcmd"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(cc), &doc))
	assert.Equal(t, [][]string{{"sh", "-c", userWorkCommand("runcmd")}}, doc.Runcmd)
	assert.True(t, strings.HasPrefix(scriptUserData("s"), "#!/bin/sh\n"))
	mime, err := mimeUserData("m")
	require.NoError(t, err)
	assert.Contains(t, mime, "MIME-Version: 1.0")
	assert.Contains(t, mime, userWorkCommand("m-script"))
	assert.Contains(t, mime, userWorkCommand("m-cloud-config"))
	assert.Equal(t, "#include\nhttp://x/y\n", includeUserData("http://x/y"))
}
