package netval

import (
	"strings"
	"testing"
)

// FuzzParsePCIAddress: whatever ParsePCIAddress accepts prints back to the lower-cased input, so the
// value libvirt gets is the one the operator wrote.
func FuzzParsePCIAddress(f *testing.F) {
	for _, s := range []string{"0000:65:00.2", "10000:01:1f.7", "ffffffff:ff:1f.7", "0000:65:20.0", "000:65:00.2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParsePCIAddress(s)
		if err != nil {
			return
		}
		if got := a.String(); !strings.EqualFold(got, s) && strings.TrimLeft(strings.ToLower(s), "0") != strings.TrimLeft(got, "0") {
			t.Fatalf("%q parsed to %+v, prints %q", s, a, got)
		}
		if a.Slot > maxPCISlot || a.Function > maxPCIFunction {
			t.Fatalf("%q parsed out of range: %+v", s, a)
		}
	})
}

// FuzzParseMAC: an accepted MAC prints in the canonical form and parses back to itself.
func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"52:54:00:12:34:56", "52-54-00-12-34-56", "5254.0012.3456", "02:00:00:00:00:00:00:01", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMAC(s)
		if err != nil {
			return
		}
		back, err := ParseMAC(m.String())
		if err != nil || back != m {
			t.Fatalf("%q -> %s -> %v, %v", s, m, back, err)
		}
	})
}
