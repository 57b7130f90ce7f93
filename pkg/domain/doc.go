// Package domain wires each VF bound to our binding into the libvirt domain XML that virt-launcher
// hands to OnDefineDomain, as a <hostdev> with alias "ua-sriov-<iface>" built with libvirtxml and
// spliced into <devices>. It must never change a byte outside the hostdevs it owns, never duplicate
// one, never move one (a hostdev that already says what ours says keeps its bytes and the guest address
// libvirt gave it), and never panic on hostile XML. Called by pkg/pipeline only (Call.OnDefineDomain, and
// the render report).
package domain
