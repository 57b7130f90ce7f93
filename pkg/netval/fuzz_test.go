package netval

import (
	"regexp"
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

// dnsNamePattern is the regexp ValidDNSName replaces (its {0,61} repetitions cost 114 KiB and 0.25 ms at
// every sidecar start, test/bench); kept here as its oracle, with the 253-byte total RFC 1035 adds.
var dnsNamePattern = regexp.MustCompile(`^([a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)(\.[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)*\.?$`)

func FuzzValidDNSName_AgreesWithTheRFC1123Pattern(f *testing.F) {
	for _, s := range []string{"", ".", "a", "a.", "a..b", "-a", "a-", "a_b.c-d.example", "x\ny", strings.Repeat("a", 63), strings.Repeat("a", 64), "a." + strings.Repeat("b", 63) + ".", "ä.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := dnsNamePattern.MatchString(s) && len(strings.TrimSuffix(s, ".")) <= MaxDNSName
		if got := ValidDNSName(s); got != want {
			t.Fatalf("ValidDNSName(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
