package integration

import (
	"encoding/xml"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice/sriov"
	"libvirt.org/go/libvirt"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// recordingDomain stands in for libvirt's domain under KubeVirt's source-side detach
// (virtwrap/live-migration-source.go hotUnplugHostDevices): it records each hostdev KubeVirt asks
// libvirt to detach and answers with the device-removed event libvirt would send.
type recordingDomain struct {
	detached []string
	events   chan interface{}
}

func (d *recordingDomain) DetachDeviceFlags(devXML string, _ libvirt.DomainDeviceModifyFlags) error {
	var hd api.HostDevice
	if err := xml.Unmarshal([]byte(devXML), &hd); err != nil {
		return err
	}
	d.detached = append(d.detached, hd.Alias.GetName())
	d.events <- api.UserAliasPrefix + hd.Alias.GetName() // libvirt reports the alias as written
	return nil
}
func (d *recordingDomain) Register() error                  { return nil }
func (d *recordingDomain) Deregister() error                { return nil }
func (d *recordingDomain) EventChannel() <-chan interface{} { return d.events }

// migrationTarget is the VMI as virt-handler hands it to the target's virt-launcher
// (SyncMigrationTarget), which passes it to OnDefineDomain in prepareMigrationTarget: with the
// migration state virt-controller wrote at the hand-off to the target pod (KubeVirt's own type).
func migrationTarget(vmi *v1.VirtualMachineInstance) *v1.VirtualMachineInstance {
	target := vmi.DeepCopy()
	target.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{
		MigrationUID: "mig-1", SourceNode: "node-a", SourcePod: "virt-launcher-vm-sriov-src",
		TargetNode: "node-b", TargetPod: "virt-launcher-vm-sriov-tgt",
	}
	return target
}

func TestMigration_StockKubeVirt_SourceWouldDetachOurVF_TargetHookRefusesFirst(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-migration")
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	spec := &api.DomainSpec{Type: "kvm", Name: "tenant-a_vm-sriov", Devices: api.Devices{
		Interfaces: []api.Interface{{Type: "ethernet", Alias: api.NewUserDefinedAlias("default"), MAC: &api.MAC{MAC: "02:00:00:00:00:01"}}},
	}}

	// The source: the domain as our OnDefineDomain wired it at the VM's start.
	out, err := mgr.OnDefineDomain(spec, vmi)
	require.NoError(t, err)
	harness.RecordDomainSpec(t, "source", spec, out) // test/libvirt runs libvirt's checks on it
	var source api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(out), &source))
	require.Len(t, source.Devices.HostDevices, 2)

	// What stock KubeVirt's source would do with it before MigrateToURI3: detach every hostdev whose
	// alias starts "sriov-", ours included...
	dom := &recordingDomain{events: make(chan interface{}, 8)}
	require.NoError(t, sriov.SafelyDetachHostDevices(&source, dom, dom, time.Second))
	assert.ElementsMatch(t, []string{"sriov-sriov-l2", "sriov-sriov-localnet"}, dom.detached,
		"stock KubeVirt detaches our VFs on the source: a migration that reached the source would drop them")
	// ...and the target's re-attach (hotplugSriovInterfaces -> sriov.CreateHostDevices) keeps only
	// core SR-IOV interfaces (iface.SRIOV != nil): nothing of ours comes back.
	reattach, err := sriov.CreateHostDevices(vmi)
	require.NoError(t, err)
	assert.Empty(t, reattach, "stock KubeVirt never re-attaches a binding plugin's VF")

	// So the migration must end before the source starts. The target's virt-launcher calls
	// OnDefineDomain in prepareMigrationTarget and fails the preparation on an error; the source
	// migrates only after the target advertised its address, which virt-handler does after that
	// preparation succeeded (migration-target.go, controller.go isMigrationSource).
	_, err = mgr.OnDefineDomain(spec, migrationTarget(vmi))
	require.Error(t, err, "the target's OnDefineDomain refuses")
	for _, want := range []string{"live migration refused", "tenant-a/vm-sriov", "virt-launcher-vm-sriov-tgt", "sriov-l2,sriov-localnet", `node "node-a"`, "keeps running"} {
		assert.Contains(t, err.Error(), want)
	}

	// The opt-in for the re-plug series lifts the refusal; the result is then discarded by the target.
	optIn := migrationTarget(vmi)
	optIn.Annotations = map[string]string{"sriov-udn.kubevirt.io/vf-migration": "replug"}
	target, err := mgr.OnDefineDomain(spec, optIn)
	require.NoError(t, err)
	harness.RecordDomainSpec(t, "replug-target", spec, target)
}

func TestMigration_ReplugThroughSRIOVHotplugPath_BuildsTheHostdevOurOnDefineDomainWrites(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	l := startBoundSidecar(t, "itest-replug")
	require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
	mgr := hooks.GetManager()
	require.NoError(t, mgr.Collect(1, 10*time.Second))
	spec := &api.DomainSpec{Type: "kvm", Name: "tenant-a_vm-sriov"}
	out, err := mgr.OnDefineDomain(spec, vmi)
	require.NoError(t, err)
	harness.RecordDomainSpec(t, "", spec, out)
	var ours api.DomainSpec
	require.NoError(t, xml.Unmarshal([]byte(out), &ours))

	// Patch 0003 hands virt-launcher's SR-IOV hotplug the VMI with each interface of a hostdev-replug
	// binding presented as SR-IOV (vmispec.WithHostDeviceReplugInterfacesAsSRIOV); virt-launcher builds
	// the hostdevs from the pod's network-info (sriov.CreateHostDevices).
	var replugIfaces []v1.Interface
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Binding != nil && iface.Binding.Name == "sriov-udn" {
			iface.Binding = nil
			iface.InterfaceBindingMethod = v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}
			replugIfaces = append(replugIfaces, iface)
		}
	}
	require.Len(t, replugIfaces, 2)
	pool, err := sriov.NewPCIAddressPoolWithNetworkStatus([]byte(pod.Metadata.Annotations["kubevirt.io/network-info"]))
	require.NoError(t, err)
	kubevirts, err := sriov.CreateHostDevicesFromIfacesAndPool(replugIfaces, pool)
	require.NoError(t, err)

	require.Len(t, ours.Devices.HostDevices, len(kubevirts))
	for i, built := range kubevirts {
		// Both as libvirt reads them: virt-launcher attaches KubeVirt's as XML (hostdevice.AttachHostDevices).
		raw, err := xml.Marshal(built)
		require.NoError(t, err)
		var kv api.HostDevice
		require.NoError(t, xml.Unmarshal(raw, &kv))
		mine := ours.Devices.HostDevices[i]
		// Two spellings of the same libvirt defaults: KubeVirt leaves out mode (default "subsystem") and
		// writes the source address type, we write the mode and leave out the type (a PCI hostdev's
		// source address is PCI).
		assert.Equal(t, "subsystem", mine.Mode)
		assert.Empty(t, kv.Mode)
		require.NotNil(t, mine.Source.Address)
		assert.Empty(t, mine.Source.Address.Type)
		assert.Equal(t, "pci", kv.Source.Address.Type)
		mine.Mode, kv.Source.Address.Type = "", ""
		assert.Equal(t, kv, mine, "hostdev %s: KubeVirt's XML %s", kv.Alias.GetName(), raw)
	}
	require.NotNil(t, kubevirts[0].Address, "guest pciAddress of sriov-l2 kept")
	assert.Equal(t, "0x07", kubevirts[0].Address.Bus)
	assert.Equal(t, "0x5", kubevirts[1].Source.Address.Function)
}
