package cloudinit

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// The statements the per-NIC sections may contain. Each literal is single-quoted and made of the
// characters of its kind only, so a line that matches cannot carry anything else into PowerShell.
var (
	psAddrLit   = `'[0-9A-Fa-f.:]+'`
	psPrefixLit = `'[0-9A-Fa-f.:]+/[0-9]+'`
	psDomainLit = `'[A-Za-z0-9_.-]+'`
	psStatement = regexp.MustCompile(`^(` + strings.Join([]string{
		`try \{`,
		`    \$idx = Find-SriovUdnAdapter '[0-9A-F]{2}(-[0-9A-F]{2}){5}'`,
		`    Add-SriovUdnAddress \$idx ` + psAddrLit + ` [0-9]+`,
		`    Add-SriovUdnRoute \$idx ` + psPrefixLit + ` ` + psAddrLit,
		`    Set-NetIPInterface -InterfaceIndex \$idx -AddressFamily IPv6 -NlMtuBytes [0-9]+`,
		`    Set-DnsClientServerAddress -InterfaceIndex \$idx -ServerAddresses @\(` + psAddrLit + `(, ` + psAddrLit + `)*\)`,
		`    Set-DnsClient -InterfaceIndex \$idx -ConnectionSpecificSuffix ` + psDomainLit,
		`    \$suffixes \+= @\(` + psDomainLit + `(, ` + psDomainLit + `)*\)`,
		`\} catch \{`,
		`    Write-Warning \('sriov-udn-binding: adapter ' \+ '[A-Za-z0-9_-]+' \+ ': ' \+ \$_\)`,
		`    \$failed = \$true`,
		`\}`,
	}, "|") + `)$`)
)

// checkScript asserts the script is the fixed header, statements of psStatement only, and the fixed footer.
func checkScript(t *testing.T, script string) {
	t.Helper()
	require.True(t, strings.HasPrefix(script, windowsScriptHeader), "starts with the header")
	require.True(t, strings.HasSuffix(script, windowsScriptFooter), "ends with the footer")
	body := strings.TrimSuffix(strings.TrimPrefix(script, windowsScriptHeader), windowsScriptFooter)
	for i, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		assert.Regexp(t, psStatement, line, "body line %d", i+1)
	}
}

func TestWindowsNetworkScript_MatchesGoldenFilesAndOnlyAllowedStatements(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			script, err := WindowsNetworkScript(nil, tc.ifaces)
			require.NoError(t, err)
			assertGolden(t, goldenPath("windows", tc.name+".ps1"), []byte(script))
			if script != "" {
				checkScript(t, script)
			}
		})
	}
}

func TestWindowsNetworkScript_AppliesWhatCloudbaseInitDrops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		iface  model.BoundInterface
		want   []string // lines the script must have
		absent []string // substrings it must not have
	}{
		{"nothing beyond network_data.json: no script", nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24")
			b.Gateways = addrs("10.20.2.1")
			b.MTU = 1400 // an IPv4-only NIC: cloudbase-init sets the MTU (netsh ipv4)
		}), nil, nil},
		{"non-default routes, on-link included", nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "fd00::5/64")
			b.Routes = []model.Route{route("100.65.0.0/16", "10.20.2.1"), route("fd99::/64", "fd00::1")}
		}), []string{
			"    $idx = Find-SriovUdnAdapter '02-00-00-AA-BB-01'",
			"    Add-SriovUdnRoute $idx '100.65.0.0/16' '10.20.2.1'",
			"    Add-SriovUdnRoute $idx 'fd99::/64' 'fd00::1'",
		}, []string{"0.0.0.0/0", "::/0"}},
		{"IPv6 MTU when the NIC has IPv6", nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("fd00::5/64")
			b.MTU = 9000
		}), []string{"    Set-NetIPInterface -InterfaceIndex $idx -AddressFamily IPv6 -NlMtuBytes 9000"}, nil},
		{"IPv6 MTU on a DHCPv6 NIC", nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.DHCP = true
			b.Addresses = pfx("fd00::5/64")
			b.MTU = 1400
		}), []string{"    Set-NetIPInterface -InterfaceIndex $idx -AddressFamily IPv6 -NlMtuBytes 1400"}, nil},
		{"further addresses of a family, not the one cloudbase-init applies", nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "10.20.3.5/24", "fd00::5/64", "fd01::5/64")
			b.Gateways = addrs("10.20.3.1")
		}), []string{
			"    Add-SriovUdnAddress $idx '10.20.2.5' 24",
			"    Add-SriovUdnAddress $idx 'fd01::5' 64",
		}, []string{"'10.20.3.5'", "'fd00::5'"}},
		{"DNS of both families and search domains", nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24")
			b.DNS = model.DNS{Nameservers: addrs("10.96.0.10", "fd00:96::10"), Search: []string{"svc.cluster.local", "cluster.local"}, Domain: "ns1.svc.cluster.local"}
		}), []string{
			"    Set-DnsClientServerAddress -InterfaceIndex $idx -ServerAddresses @('10.96.0.10', 'fd00:96::10')",
			"    Set-DnsClient -InterfaceIndex $idx -ConnectionSpecificSuffix 'ns1.svc.cluster.local'",
			"    $suffixes += @('ns1.svc.cluster.local', 'svc.cluster.local', 'cluster.local')",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, err := WindowsNetworkScript(nil, []model.BoundInterface{tc.iface})
			require.NoError(t, err)
			if tc.want == nil {
				assert.Empty(t, script)
				return
			}
			checkScript(t, script)
			lines := strings.Split(script, "\n")
			for _, w := range tc.want {
				assert.Contains(t, lines, w)
			}
			for _, a := range tc.absent {
				assert.NotContains(t, script, a)
			}
		})
	}
}

func TestWindowsNetworkScript_OneSectionPerNIC_EachInItsOwnTryCatch(t *testing.T) {
	script, err := WindowsNetworkScript(nil, renderCases()[len(renderCases())-2].ifaces)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(script, "try {\n    $idx = Find-SriovUdnAdapter"))
	ifaces := mergeIfaces()
	ifaces[1].Routes = []model.Route{route("10.99.0.0/16", "10.30.0.1")}
	script, err = WindowsNetworkScript(nil, ifaces)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(script, "try {\n    $idx = Find-SriovUdnAdapter"))
	assert.Less(t, strings.Index(script, "'02-00-00-AA-BB-01'"), strings.Index(script, "'02-00-00-AA-BB-02'"))
}

// On-link routes (no next hop) get Windows' unspecified next hop. planNIC does not produce them yet, so
// the section is driven with a plan directly.
func TestWindowsNICSection_OnLinkRouteGetsTheUnspecifiedNextHop(t *testing.T) {
	p := nicPlan{name: "net1", mac: mac("02:00:00:aa:bb:01"), static: pfx("10.20.2.5/24", "fd00::5/64"),
		routes: []model.Route{{Dest: pfx("10.99.0.0/16")[0]}, {Dest: pfx("fd99::/64")[0]}}}
	var b strings.Builder
	require.NoError(t, windowsNICSection(&b, &p))
	checkScript(t, windowsScriptHeader+b.String()+windowsScriptFooter)
	assert.Contains(t, b.String(), "    Add-SriovUdnRoute $idx '10.99.0.0/16' '0.0.0.0'\n")
	assert.Contains(t, b.String(), "    Add-SriovUdnRoute $idx 'fd99::/64' '::'\n")
}

func TestWindowsNetworkScript_LeavesTheNICsTheUserConfigures(t *testing.T) {
	ifaces := mergeIfaces()
	ifaces[1].Routes = []model.Route{route("10.99.0.0/16", "10.30.0.1")}
	for _, tc := range []struct{ name, user string }{
		{"by MAC, any case", `{"links":[{"id":"x","type":"phy","ethernet_mac_address":"02:00:00:AA:BB:01"}]}`},
		{"by name", `{"links":[{"id":"x","type":"phy","name":"net1"}, 5, {"name": 7}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, err := WindowsNetworkScript([]byte(tc.user), ifaces)
			require.NoError(t, err)
			checkScript(t, script)
			assert.NotContains(t, script, "'02-00-00-AA-BB-01'")
			assert.Contains(t, script, "'02-00-00-AA-BB-02'")
		})
	}
	_, err := WindowsNetworkScript([]byte(`{"links": {}}`), ifaces)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "configDrive networkData")
}

func TestWindowsNetworkScript_RefusesWhatPlanNICRefuses_NamingTheInterface(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*model.BoundInterface)
		want string
	}{
		{"search domain with a quote", func(b *model.BoundInterface) { b.DNS.Search = []string{"a'; Remove-Item C:\\ -Recurse; '"} }, "search domain"},
		{"search domain with a Unicode quote", func(b *model.BoundInterface) { b.DNS.Search = []string{"a\u2019b"} }, "search domain"},
		{"no MAC", func(b *model.BoundInterface) { b.MAC = netval.MAC{} }, "no MAC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := nic("evil", "02:00:00:aa:bb:01", func(b *model.BoundInterface) { b.Addresses = pfx("10.0.0.5/24") })
			tc.mod(&b)
			_, err := WindowsNetworkScript(nil, []model.BoundInterface{b})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `"evil"`)
		})
	}
}

func TestPSLiteral_AdmitsOnlyItsKindsCharacters(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		check    func(string) (string, error)
		want     string // "" = error
	}{
		{"address", "10.0.0.1", func(s string) (string, error) {
			return psLiteral(s, func(c byte) bool { return isHexByte(c) || c == '.' })
		}, "'10.0.0.1'"},
		{"quote", "a'b", func(s string) (string, error) { return psLiteral(s, isIfnameByte) }, ""},
		{"dollar", "$env", func(s string) (string, error) { return psLiteral(s, isIfnameByte) }, ""},
		{"backtick", "a`b", func(s string) (string, error) { return psLiteral(s, isIfnameByte) }, ""},
		{"unicode quote", "a\u2018b", func(s string) (string, error) { return psLiteral(s, isIfnameByte) }, ""},
		{"newline", "a\nb", func(s string) (string, error) { return psLiteral(s, isIfnameByte) }, ""},
		{"empty", "", func(s string) (string, error) { return psLiteral(s, isIfnameByte) }, ""},
		{"domain", "svc.cluster.local", func(s string) (string, error) { return psLiteral(s, isDomainByte) }, "'svc.cluster.local'"},
		{"domain with space", "svc cluster", func(s string) (string, error) { return psLiteral(s, isDomainByte) }, ""},
		{"MAC", "02:00:00:aa:bb:01", parsePSMAC, "'02-00-00-AA-BB-01'"},
		{"MAC too long", "02:00:00:aa:bb:01:02", parsePSMAC, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.check(tc.in)
			if tc.want == "" {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestWindowsNetworkScriptRequested(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        bool
		err         bool
	}{
		{"absent", nil, false, false},
		{"other annotations", map[string]string{"a": "true"}, false, false},
		{"true", map[string]string{WindowsNetworkScriptAnnotation: "true"}, true, false},
		{"false", map[string]string{WindowsNetworkScriptAnnotation: "false"}, false, false},
		{"yes is not a value", map[string]string{WindowsNetworkScriptAnnotation: "yes"}, false, true},
		{"empty", map[string]string{WindowsNetworkScriptAnnotation: ""}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WindowsNetworkScriptRequested(tc.annotations)
			if tc.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), WindowsNetworkScriptAnnotation)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzWindowsNetworkScript: whatever the search domains, the script is an error or allowed statements only.
func FuzzWindowsNetworkScript(f *testing.F) {
	f.Add("svc.cluster.local", "example.org", uint16(1400))
	f.Add("a'b", "$(calc)", uint16(0))
	f.Add("x\u2019y", "`n", uint16(9000))
	f.Fuzz(func(t *testing.T, d1, d2 string, mtu uint16) {
		b := nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "fd00::5/64", "fd01::5/64")
			b.Routes = []model.Route{route("100.65.0.0/16", "10.20.2.1")}
			b.DNS = model.DNS{Nameservers: addrs("10.96.0.10"), Search: []string{d1}, Domain: d2}
			b.MTU = int(mtu)
		})
		script, err := WindowsNetworkScript(nil, []model.BoundInterface{b})
		if err != nil {
			return
		}
		checkScript(t, script)
	})
}

// parsePSMAC is psMAC behind the parse every MAC goes through before it reaches a plan.
func parsePSMAC(s string) (string, error) {
	m, err := netval.ParseMAC(s)
	if err != nil {
		return "", err
	}
	return psMAC(m), nil
}
