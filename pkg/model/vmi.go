package model

import (
	"encoding/json"
	"fmt"
)

// The VMI types below mirror the part of kubevirt.io/api core/v1 VirtualMachineInstance the sidecar
// reads, with the same JSON names. They are ours so that the sidecar does not link kubevirt.io/api
// and k8s.io/api: those packages cost ~5 MiB of RSS in every VM pod (test/bench). The test module
// decodes KubeVirt-marshalled VMIs with DecodeVMI to prove the mirror reads what KubeVirt writes.

// InterfaceStateAbsent is the interface state of a hot-unplugged interface (kubevirt.io/api).
const InterfaceStateAbsent = "absent"

// VirtualMachineInstance is the part of a KubeVirt VMI the sidecar needs.
type VirtualMachineInstance struct {
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Spec       VirtualMachineInstanceSpec `json:"spec"`
}

// ObjectMeta is the part of the VMI's metadata the sidecar needs.
type ObjectMeta struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
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
	State      string         `json:"state,omitempty"`
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

// CloudInitSource is the network data of a cloud-init volume: inline, base64, or in a Secret that
// virt-launcher reads (only `render` looks at these; the hooks get the data virt-launcher resolved).
type CloudInitSource struct {
	NetworkData          string     `json:"networkData,omitempty"`
	NetworkDataBase64    string     `json:"networkDataBase64,omitempty"`
	NetworkDataSecretRef *SecretRef `json:"networkDataSecretRef,omitempty"`
}

// SecretRef names a Secret in the VMI's namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// DecodeVMI decodes a VMI as virt-launcher sends it to hooks (json.Marshal of the KubeVirt type).
func DecodeVMI(data []byte) (*VirtualMachineInstance, error) {
	var vmi VirtualMachineInstance
	if err := json.Unmarshal(data, &vmi); err != nil {
		return nil, fmt.Errorf("decode VMI JSON: %w", err)
	}
	return &vmi, nil
}
