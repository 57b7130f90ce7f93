// Package domain wires each VF bound to our binding into the libvirt domain XML that virt-launcher
// hands to OnDefineDomain, as a <hostdev> with alias "ua-sriov-<iface>" built with libvirtxml and
// spliced into <devices>. It must never change a byte outside the hostdevs it owns, never duplicate
// one, never move one (a hostdev that already says what ours says keeps its bytes and the guest address
// libvirt gave it), and never panic on hostile XML. Called by pkg/pipeline only (Call.OnDefineDomain, and
// the render report).
//
// Why a splicer and not the whole domain through libvirtxml.Domain (unmarshal, replace our hostdevs by
// alias, marshal, as KubeVirt's passt sidecar does): that round trip cannot read what KubeVirt writes.
// libvirtxml refuses a <hostdev> without mode= ("Missing 'mode' attribute"), and KubeVirt writes the PCI
// hostdevs of core SR-IOV interfaces and of PCI host devices that way (libvirt defaults it to subsystem;
// virtwrap/device/hostdevice createPCIHostDevice): a VMI with one of them beside ours could not start. On
// the domains libvirtxml does read it drops only what libvirt does not read (the name= of block-disk
// <source> elements, the type= of a hostdev's source <address>, an empty <memory unit="">), and it takes
// about twice the time and heap. TestEditTwoWays prints the diff on every domain at hand and
// BenchmarkEditTwoWays the cost (docs/footprint.md has the figures):
//
//	SRIOV_UDN_DOMAIN_RECORD_DIR=$PWD/bin/recorded-domains go test -run EditTwoWays -bench EditTwoWays -benchmem -v ./pkg/domain
//
// (the variable adds the domains make test recorded; without it, this package's and KubeVirt's test domains).
package domain
