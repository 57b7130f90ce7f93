package model

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The VMI types below mirror, with the same JSON names, the part of kubevirt.io/api core/v1 the sidecar
// reads, so that no VM pod pays for linking kubevirt.io/api and k8s.io/api (docs/footprint.md);
// test/model decodes KubeVirt-marshalled VMIs with DecodeVMI to prove the mirror reads what KubeVirt writes.

// InterfaceStateAbsent is the interface state of a hot-unplugged interface (kubevirt.io/api).
const InterfaceStateAbsent = "absent"

// VirtualMachineInstance is the part of a KubeVirt VMI the sidecar needs.
type VirtualMachineInstance struct {
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Spec       VirtualMachineInstanceSpec   `json:"spec"`
	Status     VirtualMachineInstanceStatus `json:"status"`
}

// VirtualMachineInstanceStatus is the part of the VMI status the sidecar needs.
type VirtualMachineInstanceStatus struct {
	// MigrationState is set by virt-controller when a migration is handed to a target pod; the VMI
	// that virt-launcher passes to the target's OnDefineDomain carries it (live-migration-target.go).
	MigrationState *MigrationState `json:"migrationState,omitempty"`
}

// MigrationState is the part of kubevirt.io/api VirtualMachineInstanceMigrationState the sidecar reads.
type MigrationState struct {
	TargetNode   string `json:"targetNode,omitempty"`
	TargetPod    string `json:"targetPod,omitempty"`
	SourceNode   string `json:"sourceNode,omitempty"`
	MigrationUID string `json:"migrationUid,omitempty"`
	Completed    bool   `json:"completed,omitempty"`
	Failed       bool   `json:"failed,omitempty"`
}

// InMigrationTarget reports whether the VMI is handed to a migration target pod and the migration
// has not ended: the state in which virt-launcher's prepareMigrationTarget calls OnDefineDomain.
func (vmi *VirtualMachineInstance) InMigrationTarget() bool {
	ms := vmi.Status.MigrationState
	return ms != nil && ms.TargetPod != "" && !ms.Completed && !ms.Failed
}

// ObjectMeta is the part of the VMI's metadata the sidecar needs.
type ObjectMeta struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
	// Annotations carry per-VMI opt-ins such as cloudinit.WindowsNetworkScriptAnnotation. Never log them.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// VirtualMachineInstanceSpec is the part of the VMI spec the sidecar needs.
type VirtualMachineInstanceSpec struct {
	Domain   DomainSpec `json:"domain"`
	Networks []Network  `json:"networks,omitempty"`
	Volumes  []Volume   `json:"volumes,omitempty"`
}

// DomainSpec holds the VMI's devices.
type DomainSpec struct {
	Devices Devices `json:"devices"`
}

// Devices holds the VMI's interfaces.
type Devices struct {
	Interfaces []Interface `json:"interfaces,omitempty"`
}

// Interface is one VMI interface (spec.domain.devices.interfaces[]).
type Interface struct {
	Name       string         `json:"name"`
	MacAddress string         `json:"macAddress,omitempty"`
	PciAddress string         `json:"pciAddress,omitempty"`
	BootOrder  *uint          `json:"bootOrder,omitempty"`
	Binding    *PluginBinding `json:"binding,omitempty"`
	// Masquerade and Bridge are KubeVirt's core pod-network bindings (their content is not needed).
	Masquerade *struct{} `json:"masquerade,omitempty"`
	Bridge     *struct{} `json:"bridge,omitempty"`
	State      string    `json:"state,omitempty"`
	// Raw is the interface exactly as the VMI JSON carried it: KubeVirt's interface cache records the
	// whole interface spec (PodIfaceCacheData.iface), fields we do not model included.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the modelled fields and keeps the raw bytes.
func (i *Interface) UnmarshalJSON(data []byte) error {
	type plain Interface // no methods: no recursion
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*i = Interface(p)
	i.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// PluginBinding names the network binding plugin of an interface.
type PluginBinding struct {
	Name string `json:"name"`
}

// Network is one VMI network (spec.networks[]).
type Network struct {
	Name   string         `json:"name"`
	Multus *MultusNetwork `json:"multus,omitempty"`
	Pod    *struct{}      `json:"pod,omitempty"`
}

// MultusNetwork is a network provided by Multus.
type MultusNetwork struct {
	NetworkName string `json:"networkName"`
	Default     bool   `json:"default,omitempty"`
}

// Volume is the part of a VMI volume the sidecar needs: the inline cloud-init network data.
type Volume struct {
	Name                 string           `json:"name"`
	CloudInitNoCloud     *CloudInitSource `json:"cloudInitNoCloud,omitempty"`
	CloudInitConfigDrive *CloudInitSource `json:"cloudInitConfigDrive,omitempty"`
}

// CloudInitSource is the network data of a cloud-init volume: inline, base64 or from a secret.
type CloudInitSource struct {
	NetworkData          string     `json:"networkData,omitempty"`
	NetworkDataBase64    string     `json:"networkDataBase64,omitempty"`
	NetworkDataSecretRef *SecretRef `json:"networkDataSecretRef,omitempty"`
}

// SecretRef names a secret (k8s.io/api LocalObjectReference).
type SecretRef struct {
	Name string `json:"name,omitempty"`
}

// GivesNetworkData reports whether a cloud-init volume of the VMI names network data of the user's
// (inline, base64 or a secret). Only then is cloud-init's DHCP fallback not ours to replace.
func (vmi *VirtualMachineInstance) GivesNetworkData() bool {
	for _, v := range vmi.Spec.Volumes {
		for _, src := range []*CloudInitSource{v.CloudInitNoCloud, v.CloudInitConfigDrive} {
			if src != nil && (strings.TrimSpace(src.NetworkData) != "" || src.NetworkDataBase64 != "" || src.NetworkDataSecretRef != nil) {
				return true
			}
		}
	}
	return false
}

// DecodeVMI decodes a VMI as virt-launcher sends it to hooks (json.Marshal of the KubeVirt type).
func DecodeVMI(data []byte) (*VirtualMachineInstance, error) {
	var vmi VirtualMachineInstance
	if err := json.Unmarshal(data, &vmi); err != nil {
		return nil, fmt.Errorf("decode VMI JSON: %w", err)
	}
	return &vmi, nil
}
