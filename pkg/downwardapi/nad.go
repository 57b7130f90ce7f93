package downwardapi

// The Multus network-status types below mirror, field for field and tag for tag, those of
// network-attachment-definition-client v1.7.7 (pkg/apis/k8s.cni.cncf.io/v1/types.go), so that no VM pod
// pays for linking k8s.io/apimachinery (docs/footprint.md); test/downwardapi asserts both decode alike.

// Device-info types and version, as Multus writes them.
const (
	DeviceInfoTypePCI       = "pci"
	DeviceInfoTypeVHostUser = "vhost-user"
	DeviceInfoTypeMemif     = "memif"
	DeviceInfoTypeVDPA      = "vdpa"
)

// NetworkStatus is one entry of the k8s.v1.cni.cncf.io/network-status annotation.
type NetworkStatus struct {
	Name       string      `json:"name"`
	Interface  string      `json:"interface,omitempty"`
	IPs        []string    `json:"ips,omitempty"`
	Mac        string      `json:"mac,omitempty"`
	Mtu        int         `json:"mtu,omitempty"`
	Default    bool        `json:"default,omitempty"`
	DNS        DNS         `json:"dns,omitempty"`
	DeviceInfo *DeviceInfo `json:"device-info,omitempty"`
	Gateway    []string    `json:"gateway,omitempty"`
}

// DNS is the resolver configuration of a NetworkStatus.
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// DeviceInfo describes the device behind a network (Multus device-info spec 1.1.0).
type DeviceInfo struct {
	Type      string       `json:"type,omitempty"`
	Version   string       `json:"version,omitempty"`
	Pci       *PciDevice   `json:"pci,omitempty"`
	Vdpa      *VdpaDevice  `json:"vdpa,omitempty"`
	VhostUser *VhostDevice `json:"vhost-user,omitempty"`
	Memif     *MemifDevice `json:"memif,omitempty"`
}

// PciDevice is a PCI device-info.
type PciDevice struct {
	PciAddress        string `json:"pci-address,omitempty"`
	Vhostnet          string `json:"vhost-net,omitempty"`
	RdmaDevice        string `json:"rdma-device,omitempty"`
	PfPciAddress      string `json:"pf-pci-address,omitempty"`
	RepresentorDevice string `json:"representor-device,omitempty"`
}

// VdpaDevice is a vDPA device-info.
type VdpaDevice struct {
	ParentDevice      string `json:"parent-device,omitempty"`
	Driver            string `json:"driver,omitempty"`
	Path              string `json:"path,omitempty"`
	PciAddress        string `json:"pci-address,omitempty"`
	PfPciAddress      string `json:"pf-pci-address,omitempty"`
	RepresentorDevice string `json:"representor-device,omitempty"`
}

// VhostDevice is a vhost-user device-info.
type VhostDevice struct {
	Mode string `json:"mode,omitempty"`
	Path string `json:"path,omitempty"`
}

// MemifDevice is a memif device-info.
type MemifDevice struct {
	Role string `json:"role,omitempty"`
	Path string `json:"path,omitempty"`
	Mode string `json:"mode,omitempty"`
}
