package netval

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePCIAddress(t *testing.T) {
	tests := []struct {
		in      string
		want    PCIAddress
		wantErr string
	}{
		{in: "0000:65:00.2", want: PCIAddress{Domain: 0, Bus: 0x65, Slot: 0, Function: 2}},
		{in: "0000:c4:02.5", want: PCIAddress{Bus: 0xc4, Slot: 2, Function: 5}},
		{in: "ABCD:EF:00.0", want: PCIAddress{Domain: 0xabcd, Bus: 0xef}},
		// Intel VMD domains start at 0x10000: the kernel prints them with five digits.
		{in: "10000:01:1f.7", want: PCIAddress{Domain: 0x10000, Bus: 1, Slot: 0x1f, Function: 7}},
		{in: "ffffffff:ff:1f.7", want: PCIAddress{Domain: 0xffffffff, Bus: 0xff, Slot: 0x1f, Function: 7}},
		{in: "0000:65:00", wantErr: "want dddd:bb:ss.f"},
		{in: "000:65:00.2", wantErr: "4 to 8 domain digits"},
		{in: "100000000:01:00.0", wantErr: "4 to 8 domain digits"},
		{in: "0000:65:20.0", wantErr: "slot 0x20 is above 0x1f"},
		{in: "0000:65:00.8", wantErr: "want dddd:bb:ss.f"},
		{in: "0000:6:00.1", wantErr: "want dddd:bb:ss.f"},
		{in: "000000000:65:00.1", wantErr: "4 to 8 domain digits"},
		{in: "0000:065:00.1", wantErr: "want dddd:bb:ss.f"},
		{in: "0000:65:000.1", wantErr: "want dddd:bb:ss.f"},
		{in: "0000:0x:00.1", wantErr: "want dddd:bb:ss.f"},
		{in: "0000:65:00.2x", wantErr: "want dddd:bb:ss.f"},
		{in: "", wantErr: "want dddd:bb:ss.f"},
		{in: "g000:65:00.1", wantErr: "want dddd:bb:ss.f"},
		{in: "+000:65:00.1", wantErr: "want dddd:bb:ss.f"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePCIAddress(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "invalid PCI address "+Quote(tt.in))
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, strings.ToLower(tt.in), got.String())
		})
	}
}

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in      string
		want    MAC
		wantErr string
	}{
		{in: "52:54:00:12:34:56", want: MAC{0x52, 0x54, 0, 0x12, 0x34, 0x56}},
		{in: "52-54-00-AB-CD-EF", want: MAC{0x52, 0x54, 0, 0xab, 0xcd, 0xef}},
		{in: "00:00:00:00:00:00", want: MAC{}},
		{in: "02:00:00:00:00:00:00:01", wantErr: "not a 48-bit Ethernet address"},
		{in: "nope", wantErr: `invalid MAC "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseMAC(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMAC_ValueSemantics(t *testing.T) {
	a, err := ParseMAC("52:54:00:AA:BB:CC")
	require.NoError(t, err)
	b, err := ParseMAC("52-54-00-aa-bb-cc")
	require.NoError(t, err)
	seen := map[MAC]bool{a: true}
	assert.True(t, seen[b], "the same MAC in two spellings is one map key")
	assert.Equal(t, "52:54:00:aa:bb:cc", a.String())
	assert.Equal(t, "52:54:00:aa:bb:cc", a.HardwareAddr().String())
	assert.True(t, MAC{}.IsZero())
	assert.Nil(t, MAC{}.HardwareAddr())
	assert.False(t, a.IsZero())
	assert.NoError(t, a.CheckUnicast())
	assert.ErrorContains(t, MAC{0x01, 0, 0x5e, 0, 0, 1}.CheckUnicast(), "multicast")
}

func TestCheckHardwareAddr_AcceptsEveryLinkLayer(t *testing.T) {
	assert.NoError(t, CheckHardwareAddr("52:54:00:12:34:56"))
	assert.NoError(t, CheckHardwareAddr("02:00:00:00:00:00:00:01"))
	assert.NoError(t, CheckHardwareAddr("00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"))
	assert.ErrorContains(t, CheckHardwareAddr("zz"), `invalid MAC "zz"`)
}

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in      string
		want    netip.Addr
		wantErr string
	}{
		{in: "10.0.0.1", want: netip.MustParseAddr("10.0.0.1")},
		{in: "fd00::1", want: netip.MustParseAddr("fd00::1")},
		{in: "::ffff:10.0.0.1", want: netip.MustParseAddr("10.0.0.1")},
		{in: "fe80::1%eth0", wantErr: "has a zone"},
		{in: "10.0.0.1/24", wantErr: "invalid IP address"},
		{in: "", wantErr: "invalid IP address"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddr(tt.in)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParsePrefix(t *testing.T) {
	p, err := ParsePrefix("10.20.2.5/24")
	require.NoError(t, err)
	assert.Equal(t, "10.20.2.5/24", p.String(), "host bits are kept")
	_, err = ParsePrefix("::ffff:10.0.0.1/120")
	assert.ErrorContains(t, err, "IPv4-mapped")
	_, err = ParsePrefix("10.0.0.1")
	assert.ErrorContains(t, err, "invalid CIDR")
}

func TestCheckUnicast(t *testing.T) {
	for in, ok := range map[string]bool{
		"10.0.0.1": true, "fd00::1": true, "fe80::1": true,
		"0.0.0.0": false, "::": false, "224.0.0.1": false, "ff02::1": false, "127.0.0.1": false, "::1": false,
		"255.255.255.255": false,
	} {
		err := CheckUnicast(netip.MustParseAddr(in))
		assert.Equal(t, ok, err == nil, "%s: %v", in, err)
	}
	assert.ErrorContains(t, CheckUnicast(netip.Addr{}), "missing IP address")
	assert.ErrorContains(t, CheckUnicast(netip.MustParseAddr("fe80::1%eth0")), "has a zone")
}

func TestValidDNSName(t *testing.T) {
	for in, ok := range map[string]bool{
		"example.com": true, "example.com.": true, "_srv._tcp.example": true, "a-b.c": true,
		"": false, ".": false, "-a.b": false, "a-.b": false, "a..b": false, "a b": false, "a;b": false,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
		strings.Repeat("a.", 126) + "a": true, strings.Repeat("a.", 127) + "a": false,
	} {
		assert.Equal(t, ok, ValidDNSName(in), "%q", in)
	}
}

func TestCheckMTU(t *testing.T) {
	for mtu, ok := range map[int]bool{0: true, 68: true, 1500: true, 9000: true, 65535: true, 67: false, 65536: false, -1: false} {
		assert.Equal(t, ok, CheckMTU(mtu) == nil, "%d", mtu)
	}
	for mtu, ok := range map[int]bool{0: true, 1: true, 65535: true, 65536: false, -1: false} {
		assert.Equal(t, ok, CheckReportedMTU(mtu) == nil, "%d", mtu)
	}
}

func TestQuote_TruncatesLongValues(t *testing.T) {
	assert.Equal(t, `"a\nb"`, Quote("a\nb"))
	long := Quote(strings.Repeat("x", 100))
	assert.True(t, strings.HasSuffix(long, "...(100 bytes)"), long)
}

func TestParseUnicast(t *testing.T) {
	a, err := ParseUnicast("::ffff:10.0.0.1")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), a)
	_, err = ParseUnicast("224.0.0.1")
	assert.ErrorContains(t, err, "not a unicast address")
	_, err = ParseUnicast("x")
	assert.ErrorContains(t, err, `invalid IP address "x"`)
}
