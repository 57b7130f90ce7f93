package downwardapi

import (
	"net/netip"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// Annotation keys the sidecar reads from the pod-info volume.
const (
	NetworkInfoAnnotation   = "kubevirt.io/network-info"
	NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
	PodNetworksAnnotation   = "k8s.ovn.org/pod-networks"
)

// File names inside the pod-info DownwardAPI volume (KubeVirt PR #18026: hooks.PodInfoLabelsFile,
// hooks.PodInfoAnnotationsFile).
const (
	LabelsFile      = "labels"
	AnnotationsFile = "annotations"
)

// MaxFileSize is the largest DownwardAPI file the sidecar reads; larger files are rejected.
const MaxFileSize = 1 << 20

// NetworkInfo is the value of the kubevirt.io/network-info annotation, as KubeVirt writes it
// (pkg/network/downwardapi/types.go). It is also the whole content of the device-info file.
type NetworkInfo struct {
	Interfaces []NetworkInfoInterface `json:"interfaces,omitempty"`
}

// NetworkInfoInterface is one entry of NetworkInfo: the VMI network, and the device-info, MAC (KubeVirt
// >= v1.8) and MTU (>= v1.9) virt-controller copies from network-status (pkg/network/downwardapi/networkinfo.go).
// Mac is "" and Mtu 0 when absent.
type NetworkInfoInterface struct {
	Network    string      `json:"network"`
	DeviceInfo *DeviceInfo `json:"deviceInfo,omitempty"`
	Mac        string      `json:"mac,omitempty"`
	Mtu        int         `json:"mtu,omitempty"`
}

// PodNetworks is the parsed, validated k8s.ovn.org/pod-networks annotation, keyed "default",
// "<ns>/<nad>" or "<ns>/<nad>/<n>".
type PodNetworks map[string]PodNetwork

// PodNetwork is one validated entry of k8s.ovn.org/pod-networks. OVN-Kubernetes keeps its Go type
// unexported (go-controller/pkg/util/pod_annotation.go), so this is ours.
type PodNetwork struct {
	// IPAddresses keep the host address and the subnet prefix ("10.20.2.5/24"); empty for IPAM-less networks.
	IPAddresses    []netip.Prefix
	MAC            netval.MAC // all-zero when OVN-Kubernetes set none
	Gateways       []netip.Addr
	Routes         []PodRoute
	IPv6LLAGateway netip.Addr // zero when absent
	TunnelID       int
	Role           string // "primary", "secondary", "infrastructure-locked" or ""
	IPAMMode       string // "" or "dhcp" (OKEP-6224, proposed)
}

// PodRoute is one entry of a pod-networks "routes" list. OVN-K never puts the default route here.
type PodRoute struct {
	Dest    netip.Prefix
	NextHop netip.Addr
}

// Snapshot is an immutable view of everything the sidecar reads from its DownwardAPI volumes.
// Consumers must not modify it; the watcher publishes a new Snapshot when content changes.
type Snapshot struct {
	Generation uint64 // increases by one for every published snapshot

	// DeviceInfo is the parsed device-info file; nil when the file is absent or empty (not yet written).
	DeviceInfo *NetworkInfo

	PodInfo     bool // false when the pod-info volume (labels/annotations) is absent
	Labels      map[string]string
	Annotations map[string]string

	// Parsed annotations; nil when the annotation is absent (or its source unavailable).
	NetworkInfo   *NetworkInfo
	NetworkStatus []NetworkStatus
	PodNetworks   PodNetworks

	// Problems holds one error, naming file, key and field, per source that exists but could not be
	// parsed (too large, malformed, invalid field); its typed field above stays nil.
	Problems []error
}

// Missing names one item a hook needs that the snapshot does not (yet) have.
type Missing struct {
	Interface string // VMI interface name, if the item belongs to one
	Network   string // VMI network name, if the item belongs to one
	Source    string // file path or annotation key
	Field     string // field inside the source, e.g. "device-info.pci.pci-address"
}
