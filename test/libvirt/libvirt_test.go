package libvirt_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "kubevirt.io/api/core/v1"
	cmdv1 "kubevirt.io/kubevirt/pkg/handler-launcher-com/cmd/v1"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter"
	archconverter "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter/arch"
	convertertypes "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter/types"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/libvirtcheck"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/trixietools"
)

const bindingName = "sriov-udn"

// env is the tools root and one libvirtd for the whole package run.
type env struct {
	root   trixietools.Root
	daemon *libvirtcheck.Daemon
}

func setup(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping libvirt's checks in -short mode: the trixie tools root takes minutes to build cold (run `make test-libvirt`)")
	}
	if why := trixietools.Unavailable(); why != "" {
		t.Skip("skipping libvirt's checks: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	root, err := trixietools.Ensure(ctx, trixietools.DefaultCacheDir(), t.Logf)
	require.NoError(t, err)
	t.Logf("TIMING trixie tools root ready in %s", time.Since(start).Round(100*time.Millisecond))
	// Not t.TempDir(): its path holds the test's name, and the daemon's socket below it must fit a unix
	// socket address (108 bytes).
	state, err := os.MkdirTemp("", "libvirtd-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	d, err := libvirtcheck.Start(ctx, root, state)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	version, err := d.Version(ctx)
	require.NoErrorf(t, err, "libvirtd log:\n%s", d.LogTail())
	t.Logf("libvirt: %s", strings.Join(strings.Fields(version), " "))
	virtType, err := d.VirtType(ctx)
	require.NoErrorf(t, err, "libvirtd log:\n%s", d.LogTail())
	if virtType != "kvm" {
		t.Logf("this host's libvirt offers no kvm domain for x86_64 (no usable /dev/kvm): domains of type kvm are defined as type %s, all else unchanged", virtType)
	}
	return &env{root: root, daemon: d}
}

// check runs both of libvirt's checks on a domain the sidecar returned for input (what the hook Manager
// sent it) and says which one failed: the schema on each element the sidecar added or changed, the qemu
// driver's define on the whole domain.
func (e *env) check(t *testing.T, input, domainXML []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	devices, err := libvirtcheck.ChangedDevices(input, domainXML)
	require.NoError(t, err)
	if len(devices) == 0 && bytes.Equal(input, domainXML) {
		// The sidecar returned the domain it was sent: a later OnDefineDomain call on a domain that already
		// holds its hostdevs (virt-launcher's next pass, KubeVirt main's read-back) leaves them exactly as they
		// are (pkg/domain). Judge the SR-IOV hostdevs it holds; KubeVirt's own are skipped below as ever.
		all, err := libvirtcheck.DevicesOf(domainXML)
		require.NoError(t, err)
		for _, d := range all {
			if bytes.HasPrefix(d, []byte("<hostdev")) && strings.HasPrefix(aliasOf(d), "ua-sriov-") {
				devices = append(devices, d)
			}
		}
		t.Logf("the sidecar returned the domain unchanged; judging the %d SR-IOV hostdevs it already holds", len(devices))
	}
	require.NotEmpty(t, devices, "the sidecar added or changed no <hostdev> or <interface>")
	before, err := libvirtcheck.DevicesOf(input)
	require.NoError(t, err)
	wasByAlias := map[string][]byte{}
	for _, d := range before {
		if a := aliasOf(d); a != "" {
			wasByAlias[a] = d
		}
	}
	var judged [][]byte
	for _, dev := range devices {
		// An element KubeVirt wrote that the sidecar only changed (the pod NIC's <interface>, whose MAC it
		// may set) is judged by the schema only when KubeVirt's own version passes it: the guest scenarios
		// build the domain with KubeVirt's network configurator alone, which leaves e.g. <model type="">
		// to the full converter. The whole domain's define below still parses it.
		if was, ok := wasByAlias[aliasOf(dev)]; ok {
			if err := libvirtcheck.ValidateSchema(ctx, e.root, libvirtcheck.MinimalDomainWith([][]byte{was})); err != nil {
				t.Logf("schema not judged on %q: KubeVirt's element already fails it before the hook (%v)", aliasOf(dev), err)
				continue
			}
		}
		assert.NoErrorf(t, libvirtcheck.ValidateSchema(ctx, e.root, libvirtcheck.MinimalDomainWith([][]byte{dev})),
			"virt-xml-validate (libvirt's RNG schema) on this element of the domain:\n%s", dev)
		judged = append(judged, dev)
	}
	require.NotEmpty(t, judged, "no element of the sidecar's was judged by the schema")
	assert.NoErrorf(t, e.daemon.Define(ctx, libvirtcheck.ForThisLibvirt(libvirtcheck.MinimalDomainWith(judged)), true),
		"virsh define --validate (schema and qemu driver) of the sidecar's elements in a minimal domain; libvirtd log:\n%s", e.daemon.LogTail())
	assert.NoErrorf(t, e.daemon.Define(ctx, libvirtcheck.ForThisLibvirt(domainXML), false),
		"virsh define (the qemu driver's parse and validation) of the whole domain; libvirtd log:\n%s", e.daemon.LogTail())
}

// aliasOf returns the alias name of a device element ("" when it has none).
func aliasOf(device []byte) string {
	var d struct {
		Alias struct {
			Name string `xml:"name,attr"`
		} `xml:"alias"`
	}
	if xml.Unmarshal(device, &d) != nil {
		return ""
	}
	return d.Alias.Name
}

// newVMI mixes masquerade on the pod network, KubeVirt's core SR-IOV and ifaces bound to us.
func newVMI(ours ...v1.Interface) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: k8smeta.ObjectMeta{Name: "vmi-udn", Namespace: "default", UID: types.UID("8a2b6d5e-0000-4000-8000-000000000001")},
	}
	guest := resource.MustParse("128Mi")
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: &guest}
	vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "cloudinit", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}}
	vmi.Spec.Volumes = []v1.Volume{{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}}}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{
		{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
		{Name: "core", MacAddress: "02:00:00:00:00:03", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}},
	}
	vmi.Spec.Networks = []v1.Network{*v1.DefaultPodNetwork(),
		{Name: "core", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "default/sriov-nad"}}}}
	for _, i := range ours {
		i.Binding = &v1.PluginBinding{Name: bindingName}
		vmi.Spec.Domain.Devices.Interfaces = append(vmi.Spec.Domain.Devices.Interfaces, i)
		vmi.Spec.Networks = append(vmi.Spec.Networks, v1.Network{Name: i.Name,
			NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "default/" + i.Name + "-nad"}}})
	}
	v1.SetObjectDefaults_VirtualMachineInstance(vmi)
	return vmi
}

// kubevirtDomain is the domain virt-launcher builds for vmi and sends to OnDefineDomain: KubeVirt's
// converter and defaulter (virtwrap/manager.go SyncVMI), the pod NIC attached as tap, KubeVirt's core
// SR-IOV hostdev as KubeVirt builds it (virtwrap/device/hostdevice/hostdev.go), marshalled as the hook
// Manager does (pkg/hooks/manager.go).
func kubevirtDomain(t *testing.T, vmi *v1.VirtualMachineInstance) []byte {
	t.Helper()
	out, err := xml.MarshalIndent(kubevirtDomainSpec(t, vmi), "", "\t")
	require.NoError(t, err)
	return out
}

// kubevirtDomainSpec is kubevirtDomain before the hook Manager marshals it.
func kubevirtDomainSpec(t *testing.T, vmi *v1.VirtualMachineInstance) *api.DomainSpec {
	t.Helper()
	c := &convertertypes.ConverterContext{
		Architecture:                    archconverter.NewConverter(runtime.GOARCH),
		VirtualMachine:                  vmi,
		AllowEmulation:                  true,
		SMBios:                          &cmdv1.SMBios{},
		DomainAttachmentByInterfaceName: map[string]string{"default": string(v1.Tap)},
		SRIOVDevices: []api.HostDevice{{
			Alias:   api.NewUserDefinedAlias("sriov-core"),
			Source:  api.HostDeviceSource{Address: &api.Address{Type: "pci", Domain: "0x0000", Bus: "0x3b", Slot: "0x02", Function: "0x4"}},
			Type:    api.HostDevicePCI,
			Managed: "no",
		}},
	}
	dom := &api.Domain{}
	require.NoError(t, converter.Convert_v1_VirtualMachineInstance_To_api_Domain(vmi, dom, c))
	api.NewDefaulter(c.Architecture.GetArchitecture()).SetObjectDefaults_Domain(dom)
	return &dom.Spec
}

func bound(name, hostPCI, guestPCI string, boot *uint) model.BoundInterface {
	return model.BoundInterface{Name: name, Network: name, NetworkName: "default/" + name + "-nad",
		HostPCIAddress: hostPCI, DeviceType: "pci", GuestPCIAddress: guestPCI, BootOrder: boot}
}

func TestSidecarDomains_PassLibvirtSchemaAndQemuDriverDefine(t *testing.T) {
	e := setup(t)
	two := uint(2)
	podMAC, err := netval.ParseMAC("0a:58:0a:f4:01:07")
	require.NoError(t, err)
	tests := []struct {
		name  string
		vmi   *v1.VirtualMachineInstance
		bound []model.BoundInterface
		// podNICMAC, when set, is given to the pod NIC as the sidecar does when KubeVirt wrote none.
		podNICMAC bool
	}{
		{
			name:  "one VF with guest PCI address and boot order",
			vmi:   newVMI(v1.Interface{Name: "udn", MacAddress: "02:00:00:0a:0b:0c", PciAddress: "0000:06:00.0", BootOrder: &two}),
			bound: []model.BoundInterface{bound("udn", "0000:65:00.2", "0000:06:00.0", &two)},
		},
		{
			name: "two VFs without guest addresses, one in an 8-hex-digit PCI domain",
			vmi:  newVMI(v1.Interface{Name: "udn", MacAddress: "02:00:00:0a:0b:0c"}, v1.Interface{Name: "l2sec", MacAddress: "02:00:00:0a:0b:0d"}),
			bound: []model.BoundInterface{
				bound("udn", "0000:65:00.2", "", nil),
				bound("l2sec", "10000:3b:1f.7", "", nil),
			},
		},
		{
			name:      "a VF and the pod NIC's MAC set by the sidecar",
			vmi:       newVMI(v1.Interface{Name: "udn"}),
			bound:     []model.BoundInterface{bound("udn", "0000:65:00.2", "", nil)},
			podNICMAC: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dom := kubevirtDomain(t, tc.vmi)
			out, err := domain.Apply(dom, tc.bound)
			require.NoError(t, err)
			require.Equal(t, len(tc.bound), strings.Count(string(out), "<alias name=\"ua-sriov-")-1, "one hostdev per VF beside KubeVirt's own")
			if tc.podNICMAC {
				var res domain.PodNICMAC
				out, res, err = domain.SetPodNICMAC(out, "default", podMAC)
				require.NoError(t, err)
				require.True(t, res.Set, "the converter's pod NIC has no MAC here")
			}
			e.check(t, dom, out)
		})
	}
}

// TestBrokenHostdev_RefusedByLibvirtWithItsOwnMessage keeps libvirt's words for hostdevs it must refuse,
// so a regression that writes one is caught by libvirt here, not on a node.
func TestBrokenHostdev_RefusedByLibvirtWithItsOwnMessage(t *testing.T) {
	e := setup(t)
	input := kubevirtDomain(t, newVMI(v1.Interface{Name: "udn"}))
	good, err := domain.Apply(input, []model.BoundInterface{bound("udn", "0000:65:00.2", "", nil)})
	require.NoError(t, err)
	ours := `<address domain="0x0000" bus="0x65" slot="0x00" function="0x2"></address>`
	require.Contains(t, string(good), ours, "the sidecar's hostdev source address as pkg/domain writes it")
	breakSource := func(replacement string) func(t *testing.T) ([]byte, []byte) {
		return func(t *testing.T) ([]byte, []byte) {
			return input, []byte(strings.Replace(string(good), ours, replacement, 1))
		}
	}
	tests := []struct {
		name  string
		build func(t *testing.T) (input, output []byte)
		// schema and define are libvirt's own messages (substrings) from virt-xml-validate and virsh
		// define; schema "" means the schema accepts it and only the qemu driver refuses it.
		schema, define string
	}{
		{
			name:   "source PCI slot past 0x1f",
			build:  breakSource(`<address domain="0x0000" bus="0x65" slot="0x20" function="0x2"></address>`),
			schema: "fails to validate",
			define: "XML error: Invalid PCI address slot='0x20', must be <= 0x1F",
		},
		{
			name:   "source PCI function past 7",
			build:  breakSource(`<address domain="0x0000" bus="0x65" slot="0x00" function="0x8"></address>`),
			schema: "fails to validate",
			define: "XML error: Invalid PCI address function=0x8, must be <= 7",
		},
		{
			// The sidecar passes the VMI's pciAddress through, as KubeVirt does for its own SR-IOV
			// (KubeVirt's converter tests use this address for disks); on q35 bus 0x81 is a root port
			// with slot 0 only, and libvirt says so at define time.
			name: "guest PCI address on a slot a q35 root port does not have",
			build: func(t *testing.T) ([]byte, []byte) {
				in := kubevirtDomain(t, newVMI(v1.Interface{Name: "udn", PciAddress: "0000:81:01.0"}))
				out, err := domain.Apply(in, []model.BoundInterface{bound("udn", "0000:65:00.2", "0000:81:01.0", nil)})
				require.NoError(t, err)
				return in, out
			},
			define: "XML error: Invalid PCI address 0000:81:01.0. slot must be <= 0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			input, broken := tc.build(t)
			devices, err := libvirtcheck.ChangedDevices(input, broken)
			require.NoError(t, err)
			require.Len(t, devices, 1, "the sidecar's hostdev")
			schemaErr := libvirtcheck.ValidateSchema(ctx, e.root, libvirtcheck.MinimalDomainWith(devices))
			if tc.schema == "" {
				assert.NoError(t, schemaErr, "virt-xml-validate")
			} else if assert.Error(t, schemaErr, "virt-xml-validate accepted the broken hostdev") {
				assert.Contains(t, schemaErr.Error(), tc.schema)
			}
			defineErr := e.daemon.Define(ctx, libvirtcheck.ForThisLibvirt(broken), false)
			require.Error(t, defineErr, "virsh define accepted the broken hostdev")
			assert.Contains(t, defineErr.Error(), tc.define)
			t.Logf("libvirt refused it: %s", lastLine(defineErr.Error()))
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestRecordedDomains_FromHookManagerRuns_PassLibvirtChecks(t *testing.T) {
	dir := os.Getenv(harness.RecordDirEnv)
	if dir == "" {
		t.Skipf("skipping: %s is unset (make test sets it for test-integration and test-guest, then runs this)", harness.RecordDirEnv)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+harness.RecordedOutputSuffix))
	require.NoError(t, err)
	// Set means the suites before were told to record (make test): none recorded is their failure, not a skip.
	require.NotEmptyf(t, files, "no recorded domain in %s although %s is set: test-integration and test-guest record every "+
		"OnDefineDomain result through KubeVirt's hook Manager there", dir, harness.RecordDirEnv)
	sort.Strings(files)
	e := setup(t)
	t.Logf("%d recorded domains in %s", len(files), dir)
	for _, f := range files {
		name := strings.TrimSuffix(f, harness.RecordedOutputSuffix)
		t.Run(filepath.Base(name), func(t *testing.T) {
			out, err := os.ReadFile(f)
			require.NoError(t, err)
			in, err := os.ReadFile(name + harness.RecordedInputSuffix)
			require.NoError(t, err)
			e.check(t, in, out)
		})
	}
}
