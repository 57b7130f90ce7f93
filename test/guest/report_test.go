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
