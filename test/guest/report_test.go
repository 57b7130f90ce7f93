package guest

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syntheticReport frames sections the way reportScript does.
func syntheticReport(sections map[string]string, order ...string) string {
	var b strings.Builder
	b.WriteString("kernel noise before the report\r\n")
	b.WriteString(reportBegin + "\r\n")
	for _, name := range order {
		b.WriteString(sectionBegin + name + "\r\n" + sections[name] + "\r\n\r\n" + sectionEnd + name + "\r\n")
	}
	b.WriteString(reportEnd + "\r\n")
	return b.String()
}

var validSections = map[string]string{
	"addr": `[{"ifname":"lo","address":"00:00:00:00:00:00","operstate":"UNKNOWN","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host"}]},
{"ifname":"eth1","address":"02:00:00:0A:00:05","operstate":"UP","addr_info":[
 {"family":"inet","local":"10.200.0.5","prefixlen":24,"scope":"global"},
 {"family":"inet6","local":"fd10:200::5","prefixlen":64,"scope":"global","tentative":true},
 {"family":"inet6","local":"fe80::ff:fe0a:5","prefixlen":64,"scope":"link"}]},
{"ifname":"eth2","address":"02:00:00:1e:00:05","operstate":"UP","addr_info":[{"family":"inet","local":"10.0.2.15","prefixlen":24,"scope":"global","dynamic":true}]}]`,
	"route4": `[{"dst":"default","gateway":"10.0.2.2","dev":"eth2","protocol":"dhcp"},{"dst":"10.200.0.0/24","dev":"eth1","protocol":"kernel"}]`,
	"route6": `[{"dst":"fd10:200::/64","dev":"eth1","protocol":"kernel"},{"dst":"default","gateway":"fd10:200::1","dev":"eth1","protocol":"static"}]`,
	"networkd": "# /run/systemd/network/10-netplan-eth2.network\n[Match]\nPermanentMACAddress=02:00:00:1e:00:05\nName=eth2\n\n[Network]\nDHCP=ipv4\n" +
		"# /run/systemd/network/10-netplan-eth1.network\n[Match]\nPermanentMACAddress=02:00:00:0a:00:05\n[Network]\nAddress=10.200.0.5/24\n",
	"cloudinit": `{"v1":{"datasource":"DataSourceNoCloud [seed=/dev/vdb][dsmode=net]","init":{"errors":[]},"modules-config":{"errors":["('locale', boom)"]},"stage":"modules-final"}}`,
}

var allSections = []string{"addr", "route4", "route6", "networkd", "cloudinit"}

func TestParseReport_ReadsLinksRoutesUnitsAndCloudInitStatus(t *testing.T) {
	r, err := ParseReport(syntheticReport(validSections, allSections...))
	require.NoError(t, err)

	l, ok := r.LinkByMAC("02:00:00:0a:00:05")
	require.True(t, ok, "MAC lookup is case-insensitive")
	assert.Equal(t, "eth1", l.Name)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.200.0.5/24")}, l.GlobalPrefixes(), "tentative and link-local addresses are not counted")

	dhcp, ok := r.LinkByMAC("02:00:00:1e:00:05")
	require.True(t, ok)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.2.15/24")}, dhcp.DynamicPrefixes())

	assert.Equal(t, []Route{{Dst: "default", Gateway: netip.MustParseAddr("10.0.2.2"), Dev: "eth2", Protocol: "dhcp"}}, r.DefaultRoutes("eth2"))
	assert.Equal(t, []Route{{Dst: "default", Gateway: netip.MustParseAddr("fd10:200::1"), Dev: "eth1", Protocol: "static", IPv6: true}}, r.DefaultRoutes("eth1"))
	assert.Len(t, r.DefaultRoutes(""), 2)
	assert.Len(t, r.RoutesVia("eth1"), 2)

	path, unit, ok := r.NetworkdUnitFor("02:00:00:1E:00:05")
	require.True(t, ok)
	assert.Equal(t, "/run/systemd/network/10-netplan-eth2.network", path)
	assert.Equal(t, []string{"ipv4"}, UnitValues(unit, "DHCP"))

	assert.Equal(t, "DataSourceNoCloud [seed=/dev/vdb][dsmode=net]", r.Datasource)
	assert.Equal(t, map[string][]string{"modules-config": {"('locale', boom)"}}, r.StageErrors)
}

func TestParseReport_RejectsIncompleteOrMalformedReports(t *testing.T) {
	broken := func(name, value string) map[string]string {
		s := map[string]string{}
		for k, v := range validSections {
			s[k] = v
		}
		s[name] = value
		return s
	}
	tests := []struct {
		name    string
		serial  string
		wantErr string
	}{
		{"no report at all", "[  1.0] booting\n", "no \"@@report-end\""},
		{"cut off before the end", strings.TrimSuffix(syntheticReport(validSections, allSections...), reportEnd+"\r\n"), "incomplete"},
		{"section missing", syntheticReport(validSections, "addr", "route4", "networkd", "cloudinit"), `no section "route6"`},
		{"addr not JSON", syntheticReport(broken("addr", "Cannot find device"), allSections...), `section "addr"`},
		{"bad address", syntheticReport(broken("addr", `[{"ifname":"x","addr_info":[{"local":"10.0.0.300","prefixlen":8}]}]`), allSections...), "10.0.0.300"},
		{"bad gateway", syntheticReport(broken("route4", `[{"dst":"default","gateway":"nope"}]`), allSections...), "gateway \"nope\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseReport(tt.serial)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// A report captured from a real boot (NoCloud, the user's v2 networkData plus the sidecar's NIC),
// so the parser is tested against iproute2's and cloud-init's actual output, not only our idea of it.
func TestParseReport_RealGuestReport(t *testing.T) {
	data, err := os.ReadFile("testdata/report-user-networkdata.txt")
	require.NoError(t, err)
	r, err := ParseReport(string(data))
	require.NoError(t, err)

	user, ok := r.LinkByMAC(podNICMAC)
	require.True(t, ok)
	assert.Equal(t, "podnic", user.Name)
	assert.Equal(t, 1500, user.MTU)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix(userStaticAddr)}, user.GlobalPrefixes())
	bound, ok := r.LinkByMAC(secondaryMAC)
	require.True(t, ok)
	assert.ElementsMatch(t, []netip.Prefix{netip.MustParsePrefix("10.200.0.5/24"), netip.MustParsePrefix("fd10:200::5/64")}, bound.GlobalPrefixes())
	if assert.Len(t, r.DefaultRoutes(""), 1) {
		assert.Equal(t, "podnic", r.DefaultRoutes("")[0].Dev)
	}
	assert.True(t, strings.HasPrefix(r.Datasource, datasourceNoCld))
	assert.Empty(t, r.StageErrors)
	_, _, ok = r.NetworkdUnitFor(secondaryMAC)
	assert.True(t, ok, "netplan's networkd unit for the bound NIC is found by MAC")
}

func TestParseReport_UserWorkAndInstanceID(t *testing.T) {
	sections := map[string]string{}
	for k, v := range validSections {
		sections[k] = v
	}
	sections["userwork"] = "# " + userWorkDir + "/runcmd.log\nran\nran\n\n# " + userWorkDir + "/script.log\nran\n"
	sections["instance"] = "iid-123\n"
	r, err := ParseReport(syntheticReport(sections, append(allSections, "userwork", "instance")...))
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"runcmd": 2, "script": 1}, r.UserWork)
	assert.Equal(t, "iid-123", r.InstanceID)
}

// nmcliOutput is what `nmcli -t -f ... device show` printed on the Debian 13 NetworkManager guest
// (NetworkManager 1.52.1), trimmed to two devices.
const nmcliOutput = `GENERAL.DEVICE:podnic
GENERAL.HWADDR:02:00:00:00:00:01
GENERAL.STATE:100 (connected)
GENERAL.CONNECTION:cloud-init podnic
IP4.ADDRESS[1]:192.0.2.10/24
IP4.GATEWAY:192.0.2.1
IP4.ROUTE[1]:dst = 0.0.0.0/0, nh = 192.0.2.1, mt = 101
IP4.ROUTE[2]:dst = 192.0.2.0/24, nh = 0.0.0.0, mt = 101
IP6.ADDRESS[1]:fe80::ff:fe00:1/64
IP6.GATEWAY:
IP6.ROUTE[1]:dst = fe80::/64, nh = ::, mt = 1024

GENERAL.DEVICE:l2sec
GENERAL.HWADDR:02:00:00:0A:00:05
GENERAL.STATE:100 (connected)
GENERAL.CONNECTION:cloud-init l2sec
IP4.ADDRESS[1]:10.200.0.5/24
IP4.GATEWAY:
IP4.ROUTE[1]:dst = 192.168.77.0/24, nh = 0.0.0.0, mt = 100
IP6.ADDRESS[1]:fe80::ff:fe0a:5/64
IP6.ADDRESS[2]:fd10\:200\:\:5/64
IP6.GATEWAY:
DHCP4.OPTION[1]:routers = 10.0.2.2
`

func TestParseNMCLI_DevicesAddressesGatewaysOnLinkRoutesAndLease(t *testing.T) {
	devs, err := parseNMCLI(nmcliOutput)
	require.NoError(t, err)
	require.Len(t, devs, 2)
	r := &Report{NM: devs}

	pod, ok := r.NMDeviceByMAC("02:00:00:00:00:01")
	require.True(t, ok)
	assert.Equal(t, "podnic", pod.Device)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.1")}, pod.Gateways)
	assert.Contains(t, pod.Routes, NMRoute{Dst: netip.MustParsePrefix("0.0.0.0/0"), NextHop: netip.MustParseAddr("192.0.2.1")})
	assert.Empty(t, pod.DHCP4)

	vf, ok := r.NMDeviceByMAC("02:00:00:0a:00:05")
	require.True(t, ok, "nmcli prints MACs upper case")
	assert.Equal(t, "100 (connected)", vf.State)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.200.0.5/24"), netip.MustParsePrefix("fd10:200::5/64")}, vf.GlobalPrefixes(),
		"link-local left out, escaped colons read")
	assert.Empty(t, vf.Gateways)
	assert.Equal(t, []NMRoute{{Dst: netip.MustParsePrefix("192.168.77.0/24"), NextHop: netip.MustParseAddr("0.0.0.0")}}, vf.Routes)
	assert.Equal(t, []string{"routers = 10.0.2.2"}, vf.DHCP4)
}

func TestParseNMCLI_RejectsWhatItCannotRead_NamingDeviceAndField(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"bad address", "GENERAL.DEVICE:eth0\nIP4.ADDRESS[1]:10.0.0.300/24\n", "device eth0 IP4.ADDRESS"},
		{"bad gateway", "GENERAL.DEVICE:eth0\nIP6.GATEWAY:fd00::zz\n", "device eth0 IP6.GATEWAY"},
		{"route without next hop", "GENERAL.DEVICE:eth0\nIP4.ROUTE[1]:dst = 10.0.0.0/8, mt = 5\n", "want dst and nh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseNMCLI(tc.text)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestKeyfileValues_ReadsOneSection(t *testing.T) {
	keyfile := "[connection]\nid=x\n[ipv4]\nmethod=auto\n[ipv6]\nmethod=manual\n"
	assert.Equal(t, []string{"auto"}, KeyfileValues(keyfile, "ipv4", "method"))
	assert.Equal(t, []string{"manual"}, KeyfileValues(keyfile, "ipv6", "method"))
	assert.Empty(t, KeyfileValues(keyfile, "ethernet", "mac-address"))
}

func TestParseReport_NetworkManagerGuest_ReadsVersionNMCLIAndKeyfiles(t *testing.T) {
	sections := map[string]string{
		"version":       "/usr/bin/cloud-init 25.1.4",
		"nmcli":         nmcliOutput,
		"nmconnections": "# /etc/NetworkManager/system-connections/cloud-init-l2sec.nmconnection\n[ethernet]\nmac-address=02:00:00:0A:00:05\n[ipv4]\nmethod=manual\n",
	}
	for k, v := range validSections {
		sections[k] = v
	}
	r, err := ParseReport(syntheticReport(sections, append([]string{"version", "nmcli", "nmconnections"}, allSections...)...))
	require.NoError(t, err)
	assert.Equal(t, "25.1.4", r.CloudInitVersion)
	require.NotNil(t, r.NM)
	assert.Len(t, r.NM, 2)
	path, keyfile, ok := r.NMConnectionFor("02:00:00:0a:00:05")
	require.True(t, ok)
	assert.Equal(t, "/etc/NetworkManager/system-connections/cloud-init-l2sec.nmconnection", path)
	assert.Equal(t, []string{"manual"}, KeyfileValues(keyfile, "ipv4", "method"))

	plain, err := ParseReport(syntheticReport(validSections, allSections...))
	require.NoError(t, err)
	assert.Nil(t, plain.NM, "no nmcli section: a guest without NetworkManager")
	assert.Empty(t, plain.CloudInitVersion)
}

func TestClusterReportScript_WritesTheReportToTheConsoleAndStaysUp(t *testing.T) {
	s := clusterReportScript()
	assert.NotEqual(t, reportScript, s, "the default report's ending was found and replaced")
	assert.NotContains(t, s, "poweroff")
	assert.NotContains(t, s, "ttyS1")
	assert.Contains(t, s, "cat /run/guest-report.txt >/dev/ttyS0\n")
	assert.Contains(t, ClusterImageSpec().Packages, "qemu-guest-agent")
	assert.Contains(t, ClusterImageSpec().Packages, "systemd-resolved")
	assert.NotEqual(t, DefaultImageSpec().Key(), ClusterImageSpec().Key())
}
