package libvirtcheck

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// schemaDevices are the <devices> children the sidecar writes or changes: its <hostdev>s (one per VF) and
// the pod NIC's <interface>, whose MAC it may set.
var schemaDevices = map[string]bool{"hostdev": true, "interface": true}

// DevicesOf returns the raw text of every domain/devices/hostdev and domain/devices/interface element, in
// document order.
func DevicesOf(domainXML []byte) ([][]byte, error) {
	dec := xml.NewDecoder(bytes.NewReader(domainXML))
	var (
		path  []string
		start int64
		found [][]byte
	)
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read domain XML at byte %d: %w", before, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			path = append(path, el.Name.Local)
			if len(path) == 3 && path[0] == "domain" && path[1] == "devices" && schemaDevices[el.Name.Local] {
				start = before
			}
		case xml.EndElement:
			if len(path) == 3 && path[0] == "domain" && path[1] == "devices" && schemaDevices[el.Name.Local] {
				found = append(found, domainXML[start:dec.InputOffset()])
			}
			path = path[:len(path)-1]
		}
	}
	if len(path) != 0 {
		return nil, fmt.Errorf("domain XML ends inside <%s>", path[len(path)-1])
	}
	return found, nil
}

// ChangedDevices returns the devices of after (DevicesOf) that before does not hold byte for byte: what a
// hook added or changed. KubeVirt's own elements are left out, some of which fail the schema for reasons
// that are not the sidecar's (its core SR-IOV <hostdev> has no mode attribute, which libvirt's parser
// defaults and its RNG schema requires; KubeVirt v1.8.4 hostdevice/hostdev.go createPCIHostDevice).
func ChangedDevices(before, after []byte) ([][]byte, error) {
	was, err := DevicesOf(before)
	if err != nil {
		return nil, fmt.Errorf("domain before the hook: %w", err)
	}
	now, err := DevicesOf(after)
	if err != nil {
		return nil, fmt.Errorf("domain after the hook: %w", err)
	}
	seen := map[string]int{}
	for _, d := range was {
		seen[string(d)]++
	}
	var changed [][]byte
	for _, d := range now {
		if seen[string(d)] > 0 {
			seen[string(d)]--
			continue
		}
		changed = append(changed, d)
	}
	return changed, nil
}

// MinimalDomainWith returns the smallest domain libvirt's schema accepts, holding devices. KubeVirt's own
// domain fails the schema for reasons that are not the sidecar's (an empty <bios/> in <sysinfo>, seen with
// libvirt 9.0; KubeVirt's core SR-IOV <hostdev>, see ChangedDevices), so the schema judges our elements in this frame and `virsh define` parses the
// whole domain.
func MinimalDomainWith(devices [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString("<domain type='kvm'>\n  <name>schema-check</name>\n  <memory unit='MiB'>64</memory>\n" +
		"  <os>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n  <devices>\n")
	for _, d := range devices {
		b.WriteString("    ")
		b.Write(d)
		b.WriteString("\n")
	}
	b.WriteString("  </devices>\n</domain>\n")
	return b.Bytes()
}

var (
	emulatorRe = regexp.MustCompile(`(?s)<emulator>.*?</emulator>`)
	devicesRe  = regexp.MustCompile(`<devices>`)
	machineRe  = regexp.MustCompile(`machine="pc-q35-rhel[^"]*"`)
	memoryRe   = regexp.MustCompile(`<memory[ >]`)
	osRe       = regexp.MustCompile(`<os[ >]`)
	// What KubeVirt's api.DomainSpec marshals to when a fixture leaves memory and os unset.
	emptyMemoryRe = regexp.MustCompile(`<memory unit="">0</memory>`)
	emptyOSRe     = regexp.MustCompile(`(?s)<os>\s*<type></type>\s*</os>`)
	// The root element's start tag up to its type attribute's value (KubeVirt writes type="kvm").
	domainTypeRe = regexp.MustCompile(`^(\s*(?:<\?xml[^>]*\?>\s*)?<domain\b[^>]*?\btype=)(["'])([^"']*)(["'])`)
)

// WithVirtType returns domainXML with the root <domain>'s type attribute set to virtType. A libvirt on a
// host without a usable /dev/kvm offers no "kvm" domain for its emulator and refuses every KubeVirt domain
// in validation ("Emulator ... does not support virt type 'kvm'") after it has parsed all of it; type
// "qemu" (TCG) runs the same parse and device validation. A domain without a type attribute on its root is
// returned unchanged.
func WithVirtType(domainXML []byte, virtType string) []byte {
	m := domainTypeRe.FindSubmatchIndex(domainXML)
	if m == nil {
		return domainXML
	}
	out := make([]byte, 0, len(domainXML)+len(virtType))
	out = append(out, domainXML[:m[6]]...)
	out = append(out, virtType...)
	return append(out, domainXML[m[7]:]...)
}

// Emulator is qemu in the trixie tools root.
const Emulator = "/usr/bin/qemu-system-x86_64"

// ForThisLibvirt adapts what in a KubeVirt domain names the launcher image rather than the domain: the
// emulator path (KubeVirt's images have /usr/libexec/qemu-kvm, or the converter leaves it out) and RHEL
// machine types, which Debian's qemu does not know, become the tools root's qemu and plain q35. A test
// fixture built from the network part of the domain only (test/integration, test/guest; its empty
// <memory> and <os> as api.DomainSpec marshals them) gets the <memory> and <os> every domain virt-launcher
// defines has.
func ForThisLibvirt(domainXML []byte) []byte {
	out := machineRe.ReplaceAll(domainXML, []byte(`machine="q35"`))
	out = emptyMemoryRe.ReplaceAll(out, nil)
	out = emptyOSRe.ReplaceAll(out, nil)
	if !memoryRe.Match(out) {
		out = devicesRe.ReplaceAll(out, []byte("<memory unit='MiB'>128</memory><devices>"))
	}
	if !osRe.Match(out) {
		out = devicesRe.ReplaceAll(out, []byte("<os><type arch='x86_64' machine='q35'>hvm</type></os><devices>"))
	}
	emulator := []byte("<emulator>" + Emulator + "</emulator>")
	if emulatorRe.Match(out) {
		return emulatorRe.ReplaceAll(out, emulator)
	}
	return devicesRe.ReplaceAll(out, append([]byte("<devices>"), emulator...))
}
