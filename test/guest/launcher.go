package guest

import (
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strings"

	"github.com/vishvananda/netlink"
	kvv1 "kubevirt.io/api/core/v1"
	cloudinit "kubevirt.io/kubevirt/pkg/cloud-init"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/network/domainspec"
	netdriver "kubevirt.io/kubevirt/pkg/network/driver"
	"kubevirt.io/kubevirt/pkg/network/vmispec"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"
	netconverter "kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/converter/network"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/debroot"
)

// qemuUID is the uid KubeVirt's images give the qemu user; KubeVirt's ISO generator chowns its
// files to the user named "qemu" (pkg/ephemeral-disk-utils/utils.go DefaultOwnershipManager).
const qemuUID = "107"

// ensureQemuUser makes sure a "qemu" user exists, creating a system user (uid 107 when free) if
// not. It says what it did, for the test log.
func ensureQemuUser() (string, error) {
	if _, err := user.Lookup("qemu"); err == nil {
		return "user qemu exists", nil
	}
	args := []string{"--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin"}
	if _, err := user.LookupId(qemuUID); err != nil {
		args = append(args, "--uid", qemuUID)
	}
	args = append(args, "qemu")
	useradd, err := debroot.FindCommand("useradd")
	if err != nil {
		return "", err
	}
	if out, err := exec.Command(useradd, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("useradd %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return "created system user qemu (KubeVirt's ISO generator chowns to it)", nil
}

// launcherPreStart is virt-launcher's pre-start cloud-init path (pkg/virt-launcher/virtwrap/
// manager.go preStartHook), with KubeVirt's own functions: ReadCloudInitVolumeDataSource, then the
// hook Manager's PreCloudInitIso, which calls the sidecar. The caller must have collected the
// sidecar with hooks.GetManager().Collect. It returns the data as KubeVirt keeps it for the ISO.
func launcherPreStart(vmi *kvv1.VirtualMachineInstance, secretSourceDir string) (*cloudinit.CloudInitData, error) {
	data, err := cloudinit.ReadCloudInitVolumeDataSource(vmi, secretSourceDir)
	if err != nil {
		return nil, fmt.Errorf("ReadCloudInitVolumeDataSource: %w", err)
	}
	if data == nil {
		return nil, fmt.Errorf("VMI %s has no cloud-init volume", vmi.Name)
	}
	data, err = hooks.GetManager().PreCloudInitIso(vmi, data)
	if err != nil {
		return nil, fmt.Errorf("PreCloudInitIso hook failed: %w", err)
	}
	return data, nil
}

// launcherGenerateISO is the second half of virt-launcher's path (generateSomeCloudInitISO, after
// the domain is defined): PrepareLocalPath and GenerateLocalData write the files and build the ISO
// (xorrisofs), chowned to qemu. cloudinit.SetLocalDirectory must have been called. It returns the
// ISO's path (GetIsoFilePath).
func launcherGenerateISO(vmi *kvv1.VirtualMachineInstance, data *cloudinit.CloudInitData) (string, error) {
	if err := cloudinit.PrepareLocalPath(vmi.Name, vmi.Namespace); err != nil {
		return "", fmt.Errorf("PrepareLocalPath: %w", err)
	}
	instancetype := vmi.Annotations[kvv1.ClusterInstancetypeAnnotation]
	if instancetype == "" {
		instancetype = vmi.Annotations[kvv1.InstancetypeAnnotation]
	}
	if err := cloudinit.GenerateLocalData(vmi, instancetype, data); err != nil {
		return "", fmt.Errorf("GenerateLocalData: %w", err)
	}
	iso := cloudinit.GetIsoFilePath(data.DataSource, vmi.Name, vmi.Namespace)
	if _, err := os.Stat(iso); err != nil {
		return "", fmt.Errorf("KubeVirt built no ISO at %s: %w", iso, err)
	}
	return iso, nil
}

// launcherDefineDomain builds the domain's interfaces the way virt-launcher does and runs the hook
// Manager's OnDefineDomain on it, which calls the sidecar: KubeVirt's network domain configurator (the
// part of converter.Convert_v1_VirtualMachineInstance_To_api_Domain that writes <interface> elements,
// pkg/virt-launcher/virtwrap/converter/network, the pod NIC attached as tap; the whole converter needs
// modules the Go module proxy does not serve for v1.9.0, and test/domain runs it on v1.8), then, when
// podIfaceMAC is set, KubeVirt's own tap generator of SetupPodNetworkPhase2
// (pkg/network/domainspec/generators.go), which writes the pod interface's MAC into a pod NIC whose
// VMI sets none, as virt-launcher does before OnDefineDomain (virtwrap/manager.go preStartHook). With
// podIfaceMAC empty the pod NIC reaches the sidecar without a MAC. The caller must have collected the
// sidecar. It returns the domain virt-launcher would define, and the XML the Manager sent and got back.
func launcherDefineDomain(vmi *kvv1.VirtualMachineInstance, podIfaceMAC string) (spec *api.DomainSpec, sent, returned []byte, err error) {
	attachment := map[string]string{}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if iface.Masquerade != nil || iface.Bridge != nil {
			attachment[iface.Name] = string(kvv1.Tap)
		}
	}
	dom := &api.Domain{}
	dom.Spec.Type = "kvm"
	dom.Spec.Name = vmi.Namespace + "_" + vmi.Name
	configurator := netconverter.NewDomainConfigurator(netconverter.WithDomainAttachmentByInterfaceName(attachment))
	if err := configurator.Configure(vmi, dom); err != nil {
		return nil, nil, nil, fmt.Errorf("KubeVirt's network domain configurator: %w", err)
	}
	if podIfaceMAC != "" {
		mac, err := net.ParseMAC(podIfaceMAC)
		if err != nil {
			return nil, nil, nil, err
		}
		for i := range vmi.Spec.Domain.Devices.Interfaces {
			iface := &vmi.Spec.Domain.Devices.Interfaces[i]
			if attachment[iface.Name] == "" {
				continue
			}
			network := vmispec.LookupNetworkByName(vmi.Spec.Networks, iface.Name)
			gen := domainspec.NewTapLibvirtSpecGenerator(iface, *network, dom, "eth0", podLinks{macs: map[string]net.HardwareAddr{"eth0": mac}})
			if err := gen.Generate(); err != nil {
				return nil, nil, nil, fmt.Errorf("KubeVirt's tap generator for %s: %w", iface.Name, err)
			}
		}
	}
	sent, err = xml.MarshalIndent(&dom.Spec, "", "\t") // as the Manager marshals it (pkg/hooks/manager.go)
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := hooks.GetManager().OnDefineDomain(&dom.Spec, vmi)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("OnDefineDomain hook failed: %w", err)
	}
	spec = &api.DomainSpec{}
	if err := xml.Unmarshal([]byte(out), spec); err != nil { // as virt-launcher reads it back (libvirt_helper.go)
		return nil, nil, nil, fmt.Errorf("read the domain OnDefineDomain returned: %w", err)
	}
	return spec, sent, []byte(out), nil
}

// podLinks is the pod's network namespace as the tap generator sees it: the pod interface with its
// MAC; no tap device (the generator then targets the pod interface). Every other NetworkHandler method
// is left to the embedded nil interface: the generator calls only LinkByName.
type podLinks struct {
	netdriver.NetworkHandler
	macs map[string]net.HardwareAddr
}

func (p podLinks) LinkByName(name string) (netlink.Link, error) {
	mac, ok := p.macs[name]
	if !ok {
		return nil, netlink.LinkNotFoundError{}
	}
	return &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac, MTU: 1500}}, nil
}

// domainNICMACs maps VMI interface names to the MAC their <interface> has in the domain ("" when none):
// what libvirt gives the guest, or makes up when empty.
func domainNICMACs(spec *api.DomainSpec) map[string]string {
	out := map[string]string{}
	for _, iface := range spec.Devices.Interfaces {
		if iface.Alias == nil {
			continue
		}
		mac := ""
		if iface.MAC != nil {
			mac = iface.MAC.MAC
		}
		out[iface.Alias.GetName()] = mac
	}
	return out
}
