package domain

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// FuzzApply feeds arbitrary XML and interface fields to Apply. Apply must return an error or a
// well-formed domain that differs from the input only in the hostdev it owns, and that a second
// Apply leaves unchanged. A panic fails the fuzzer by itself.
func FuzzApply(f *testing.F) {
	f.Add(kubevirtDomain, "udn", "0000:65:00.2", "pci", "0000:81:01.0", uint(2))
	f.Add(kubevirtDomain, "default", "", "", "", uint(0))
	f.Add(`<domain><devices><hostdev><alias name="ua-sriov-u"/></hostdev><disk/></devices></domain>`, "u", "0000:00:1f.7", "", "", uint(0))
	f.Add("<domain>\n  <devices/>\n</domain>", "u", "ffff:ff:1f.7", "pci", "", uint(1))
	f.Add("<domain><devices>", "u", "0000:65:00.2", "pci", "", uint(0))
	f.Add(`<domain xmlns:q="urn:q"><q:devices/><devices><q:hostdev><alias name="ua-sriov-u"/></q:hostdev></devices></domain>`, "u", "0000:65:00.2", "pci", "", uint(0))
	f.Add("<domain><devices></devices></domain>", "u", "0000:65:00.2", "vdpa", "", uint(0))

	f.Fuzz(func(t *testing.T, domainXML, name, hostPCI, deviceType, guestPCI string, bootOrder uint) {
		iface := model.BoundInterface{
			Name: name, Network: "net", HostPCIAddress: hostPCI, DeviceType: deviceType, GuestPCIAddress: guestPCI,
		}
		if bootOrder != 0 {
			iface.BootOrder = &bootOrder
		}
		ifaces := []model.BoundInterface{iface}
		src := []byte(domainXML)

		out, err := Apply(src, ifaces)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with output", err)
			}
			return
		}
		if err := wellFormed(out); err != nil {
			t.Fatalf("output is not well-formed XML: %v\n%s", err, out)
		}
		again, err := Apply(out, ifaces)
		if err != nil {
			t.Fatalf("second Apply failed: %v", err)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("second Apply changed the output:\n%s\n---\n%s", out, again)
		}

		srcDoc, err := Parse(context.Background(), src)
		if err != nil {
			t.Fatalf("Apply accepted input Parse rejects: %v", err)
		}
		if srcDoc.wiredByKubeVirt(name) {
			if !bytes.Equal(src, out) {
				t.Fatalf("interface wired by KubeVirt, but the domain changed")
			}
			return
		}
		outDoc, err := Parse(context.Background(), out)
		if err != nil {
			t.Fatalf("output rejected by Parse: %v", err)
		}
		assertOnlyOurHostdevChanged(t, src, srcDoc, out, outDoc, HostdevAlias(name))
	})
}

// wellFormed checks XML well-formedness with a plain decoder, independently of Parse.
func wellFormed(doc []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func assertOnlyOurHostdevChanged(t *testing.T, src []byte, srcDoc *Document, out []byte, outDoc *Document, alias string) {
	t.Helper()
	sd, od := srcDoc.devices, outDoc.devices
	if !bytes.Equal(src[:sd.startTagStart], out[:od.startTagStart]) {
		t.Fatalf("bytes before <devices> changed")
	}
	srcRest := src[sd.endTagStart:]
	if sd.selfClosing {
		srcRest = append([]byte("</devices>"), src[sd.startTagEnd:]...)
	}
	if !bytes.Equal(srcRest, out[od.endTagStart:]) {
		t.Fatalf("bytes from </devices> on changed")
	}

	var srcKept, outKept [][]byte
	ours := 0
	for _, d := range sd.children {
		if !(d.element == "hostdev" && d.alias == alias) {
			srcKept = append(srcKept, src[d.start:d.end])
		}
	}
	for _, d := range od.children {
		if d.element == "hostdev" && d.alias == alias {
			ours++
			continue
		}
		outKept = append(outKept, out[d.start:d.end])
	}
	if ours != 1 {
		t.Fatalf("want exactly one hostdev %q, got %d", alias, ours)
	}
	if len(srcKept) != len(outKept) {
		t.Fatalf("other devices: %d before, %d after", len(srcKept), len(outKept))
	}
	for i := range srcKept {
		if !bytes.Equal(srcKept[i], outKept[i]) {
			t.Fatalf("device %d changed:\n%s\n---\n%s", i, srcKept[i], outKept[i])
		}
	}
}
