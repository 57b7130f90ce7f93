package cloudinit

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// These tests feed our output to the real `cloud-init devel net-convert` (Debian 12 ships 22.4.2, the
// compatibility floor) and read back what each renderer would write into the guest, so a form that
// cloud-init mis-renders (v2 "::/0" -> "::/64", routes under the wrong family, dropped keys) fails here.

// facts is what a renderer configured for one guest interface, normalised across renderers.
type facts struct {
	Up          bool // brought up at boot (eni "auto", sysconfig ONBOOT; networkd and NM always)
	MAC         string
	MTU         int
	DHCP4       bool
	DHCP6       bool
	Addresses   []string // CIDR
	Routes      []string // "dest via next-hop"; default routes as 0.0.0.0/0 and ::/0
	Nameservers []string
	Search      []string
	Problems    []string // renderer output that is wrong whatever we expected (e.g. a route in the other family's section)
}

func (f *facts) normalise() {
	f.MAC = strings.ToLower(f.MAC)
	for _, l := range [][]string{f.Addresses, f.Routes, f.Nameservers, f.Search, f.Problems} {
		sort.Strings(l)
	}
	f.Addresses, f.Routes, f.Nameservers, f.Search = dedup(f.Addresses), dedup(f.Routes), dedup(f.Nameservers), dedup(f.Search)
}

func dedup(in []string) []string {
	var out []string
	for i, s := range in {
		if i == 0 || in[i-1] != s {
			out = append(out, s)
		}
	}
	return out
}

var renderers = []struct{ name, distro string }{
	{"networkd", "debian"},
	{"sysconfig", "rhel"}, // 22.4.2 crashes on -D debian with sysconfig
	{"eni", "debian"},
	{"network-manager", "debian"},
}

// netConvertRootEnv names a Debian root holding another cloud-init than the host's: `make test-netconvert`
// sets it to a cached trixie root (cloud-init 25.1.4, built by test/cmd/cloudinit-root), and every
// net-convert of this package then runs there under chroot, so the same cases and fixtures are checked on
// both versions. Unset: the host's cloud-init (Debian 12: 22.4.2).
const netConvertRootEnv = "CLOUDINIT_NETCONVERT_ROOT"

func requireNetConvert(t *testing.T) {
	t.Helper()
	if root := os.Getenv(netConvertRootEnv); root != "" {
		_, err := os.Stat(filepath.Join(root, "usr/bin/cloud-init"))
		require.NoError(t, err, "%s=%s names no root with cloud-init (make test-netconvert builds one)", netConvertRootEnv, root)
		return
	}
	if _, err := exec.LookPath("cloud-init"); err != nil {
		t.Skip("cloud-init is not on PATH: `apt-get install cloud-init` (Debian 12: 22.4.2) to run the net-convert tests; CI installs it")
	}
}

// cloudInit returns the command that runs cloud-init with args, workDir (a fresh directory for the files
// it reads and writes) and inRoot, which maps a path under workDir to the path cloud-init sees.
func cloudInit(t *testing.T) (run func(args ...string) *exec.Cmd, workDir string, inRoot func(string) string) {
	t.Helper()
	root := os.Getenv(netConvertRootEnv)
	if root == "" {
		return func(args ...string) *exec.Cmd { return exec.Command("cloud-init", args...) }, t.TempDir(), func(p string) string { return p }
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "netconvert-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	run = func(args ...string) *exec.Cmd {
		return exec.Command("chroot", append([]string{root, "/usr/bin/cloud-init"}, args...)...)
	}
	inRoot = func(p string) string {
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		return "/" + rel
	}
	return run, dir, inRoot
}

// cloudInitVersion is the version of the cloud-init the tests run ("22.4.2", "25.1.4"), read once.
var cloudInitVersion = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("cloud-init", "--version")
	if root := os.Getenv(netConvertRootEnv); root != "" {
		cmd = exec.Command("chroot", root, "/usr/bin/cloud-init", "--version")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cloud-init --version: %w: %s", err, out)
	}
	// "/usr/bin/cloud-init 22.4.2"
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "", fmt.Errorf("cloud-init --version printed nothing")
	}
	return fields[len(fields)-1], nil
})

// since25 says whether the cloud-init under test is 25 or newer, where a quirk of 22.4.2 is gone or
// another one shows.
func since25(t *testing.T) bool {
	t.Helper()
	v, err := cloudInitVersion()
	require.NoError(t, err)
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	require.NoError(t, err, "cloud-init version %q", v)
	return n >= 25
}

func TestNetConvert_LogsTheCloudInitVersionUnderTest(t *testing.T) {
	requireNetConvert(t)
	v, err := cloudInitVersion()
	require.NoError(t, err)
	require.Regexp(t, `^\d+\.\d+(\.\d+)?$`, v)
	t.Logf("cloud-init %s (%s=%q)", v, netConvertRootEnv, os.Getenv(netConvertRootEnv))
}

// netConvert renders input with one renderer and parses the result. kind is "yaml" or
// "network_data.json"; macNames gives name,mac for network_data.json links without a name.
func netConvert(t *testing.T, input []byte, kind, renderer, distro string, macNames map[string]string) map[string]*facts {
	t.Helper()
	run, dir, inRoot := cloudInit(t)
	in := filepath.Join(dir, "input")
	require.NoError(t, os.WriteFile(in, input, 0o644))
	out := filepath.Join(dir, "out")
	args := []string{"devel", "net-convert", "-p", inRoot(in), "-k", kind, "-d", inRoot(out), "-D", distro, "-O", renderer}
	for mac, name := range macNames {
		args = append(args, "-m", name+","+mac)
	}
	cmd := run(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "net-convert -O %s failed:\n%s\ninput:\n%s", renderer, stderr.String(), input)
	switch renderer {
	case "networkd":
		return parseNetworkd(t, out)
	case "sysconfig":
		return parseSysconfig(t, out)
	case "eni":
		return parseENI(t, out)
	default:
		return parseNM(t, out)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	require.NoError(t, err)
	return m
}

// onLink is the normalised text of a route with no next hop; renderers write the unspecified address
// (or nothing) for it.
func onLink(dest string) string { return dest + " on-link" }

// refusedOnLink is an on-link route a renderer writes in a form the kernel refuses: eni's
// `route add -net X gw 0.0.0.0` and `route add -A inet6 X gw ::` (SIOCADDRT: Invalid argument), and
// sysconfig's IPv6 `X via :: dev nic` (ip -6 route: Invalid gateway address); checked by hand in a
// network namespace with net-tools and iproute2 on Debian 12.
func refusedOnLink(dest string) string { return dest + " on-link(refused by the kernel)" }

// routeText normalises one rendered route; accepted says whether the renderer's form for a null
// gateway means on-link (networkd, network-manager, iproute2 IPv4) or is refused.
func routeText(dest, gw string, accepted bool) string {
	if gw == "" || gw == "0.0.0.0" || gw == "::" {
		if accepted {
			return onLink(dest)
		}
		return refusedOnLink(dest)
	}
	return dest + " via " + gw
}

func defaultRoute(gw string) string {
	if strings.Contains(gw, ":") {
		return "::/0 via " + gw
	}
	return "0.0.0.0/0 via " + gw
}

func maskBits(mask string) int {
	a, err := netip.ParseAddr(mask)
	if err != nil {
		return -1
	}
	bits := 0
	for _, b := range a.AsSlice() {
		for i := 7; i >= 0; i-- {
			if b&(1<<i) != 0 {
				bits++
			}
		}
	}
	return bits
}

func parseNetworkd(t *testing.T, out string) map[string]*facts {
	res := map[string]*facts{}
	for _, file := range glob(t, filepath.Join(out, "etc/systemd/network/*.network")) {
		f := &facts{Up: true}
		var name, section, dest, gw string
		flushRoute := func() {
			if section == "Route" && (gw != "" || dest != "") {
				if dest == "" {
					f.Routes = append(f.Routes, defaultRoute(gw))
				} else {
					// networkd adds no RTA_GATEWAY for a null Gateway= (networkd-route.c): on-link.
					f.Routes = append(f.Routes, routeText(dest, gw, true))
				}
			}
			dest, gw = "", ""
		}
		for _, line := range readLines(t, file) {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "[") {
				flushRoute()
				section = strings.Trim(line, "[]")
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			switch section + "." + k {
			case "Match.MACAddress":
				f.MAC = v
			case "Match.Name":
				name = v
			case "Link.MTUBytes":
				f.MTU, _ = strconv.Atoi(v)
			case "Network.DHCP":
				f.DHCP4 = v == "yes" || v == "ipv4"
				f.DHCP6 = v == "yes" || v == "ipv6"
			case "Network.DNS":
				f.Nameservers = append(f.Nameservers, strings.Fields(v)...)
			case "Network.Domains":
				f.Search = append(f.Search, strings.Fields(v)...)
			case "Address.Address":
				f.Addresses = append(f.Addresses, v)
			case "Route.Destination":
				dest = v
			case "Route.Gateway":
				gw = v
			}
		}
		flushRoute()
		res[name] = f
	}
	return res
}

func parseSysconfig(t *testing.T, out string) map[string]*facts {
	res := map[string]*facts{}
	dir := filepath.Join(out, "etc/sysconfig/network-scripts")
	for _, file := range glob(t, filepath.Join(dir, "ifcfg-*")) {
		kv := map[string]string{}
		for _, line := range readLines(t, file) {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				kv[k] = strings.Trim(v, `"`)
			}
		}
		f := &facts{Up: kv["ONBOOT"] == "yes", MAC: kv["HWADDR"], DHCP4: kv["BOOTPROTO"] == "dhcp", DHCP6: kv["DHCPV6C"] == "yes"}
		f.MTU, _ = strconv.Atoi(kv["MTU"])
		for i := 0; i < 16; i++ {
			suffix := ""
			if i > 0 {
				suffix = strconv.Itoa(i)
			}
			ip := kv["IPADDR"+suffix]
			if ip == "" {
				continue
			}
			bits := kv["PREFIX"+suffix]
			if bits == "" {
				bits = strconv.Itoa(maskBits(kv["NETMASK"+suffix]))
			}
			f.Addresses = append(f.Addresses, ip+"/"+bits)
		}
		if v := kv["IPV6ADDR"]; v != "" {
			f.Addresses = append(f.Addresses, v)
		}
		f.Addresses = append(f.Addresses, strings.Fields(kv["IPV6ADDR_SECONDARIES"])...)
		if gw := kv["GATEWAY"]; gw != "" {
			f.Routes = append(f.Routes, defaultRoute(gw))
		}
		if gw := kv["IPV6_DEFAULTGW"]; gw != "" {
			gw, _, _ = strings.Cut(gw, "%")
			f.Routes = append(f.Routes, defaultRoute(gw))
		}
		for i := 1; kv["DNS"+strconv.Itoa(i)] != ""; i++ {
			f.Nameservers = append(f.Nameservers, kv["DNS"+strconv.Itoa(i)])
		}
		f.Search = strings.Fields(kv["DOMAIN"])
		name := kv["DEVICE"]
		if lines, err := os.ReadFile(filepath.Join(dir, "route-"+name)); err == nil {
			rkv := map[string]string{}
			for _, line := range strings.Split(string(lines), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
					rkv[k] = v
				}
			}
			for i := 0; rkv["ADDRESS"+strconv.Itoa(i)] != ""; i++ {
				n := strconv.Itoa(i)
				dest := fmt.Sprintf("%s/%d", rkv["ADDRESS"+n], maskBits(rkv["NETMASK"+n]))
				if dest == "0.0.0.0/0" {
					f.Routes = append(f.Routes, defaultRoute(rkv["GATEWAY"+n]))
					continue
				}
				// ifup-routes runs `ip route add ADDRESS/NETMASK via GATEWAY`: via 0.0.0.0 is on-link.
				f.Routes = append(f.Routes, routeText(dest, rkv["GATEWAY"+n], true))
			}
		}
		for _, line := range readLinesIfExists(filepath.Join(dir, "route6-"+name)) {
			fields := strings.Fields(line)
			if len(fields) >= 3 && fields[1] == "via" && !strings.HasPrefix(line, "#") {
				dest := fields[0]
				if dest == "default" {
					dest = "::/0"
				}
				f.Routes = append(f.Routes, routeText(dest, fields[2], dest == "::/0"))
			}
		}
		res[name] = f
	}
	return res
}

func readLinesIfExists(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\n")
}

var (
	udevRule   = regexp.MustCompile(`ATTR\{address\}=="([^"]+)", NAME="([^"]+)"`)
	eniRouteV4 = regexp.MustCompile(`^post-up route add -net (\S+) gw (\S+)`)
	eniRouteV6 = regexp.MustCompile(`^post-up route add -A inet6 (\S+) gw (\S+)`)
	eniDefault = regexp.MustCompile(`^post-up route add default gw (\S+)`)
)

func parseENI(t *testing.T, out string) map[string]*facts {
	res := map[string]*facts{}
	get := func(name string) *facts {
		if res[name] == nil {
			res[name] = &facts{}
		}
		return res[name]
	}
	for _, line := range readLinesIfExists(filepath.Join(out, "etc/udev/rules.d/70-persistent-net.rules")) {
		if m := udevRule.FindStringSubmatch(line); m != nil {
			get(m[2]).MAC = m[1]
		}
	}
	var cur *facts
	var inet string
	for _, line := range readLines(t, filepath.Join(out, "etc/network/interfaces.d/50-cloud-init")) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] == "iface" && len(fields) == 4 {
			cur, inet = nil, fields[2]
			if fields[1] == "lo" {
				continue
			}
			cur = get(fields[1])
			if fields[3] == "dhcp" {
				if inet == "inet" {
					cur.DHCP4 = true
				} else {
					cur.DHCP6 = true
				}
			}
			continue
		}
		if fields[0] == "auto" && len(fields) == 2 {
			if fields[1] != "lo" {
				get(fields[1]).Up = true
			}
			continue
		}
		if cur == nil {
			continue
		}
		rest := strings.Join(fields[1:], " ")
		switch fields[0] {
		case "address":
			cur.Addresses = append(cur.Addresses, rest)
		case "gateway":
			cur.Routes = append(cur.Routes, defaultRoute(rest))
		case "mtu":
			cur.MTU, _ = strconv.Atoi(rest)
		case "dns-nameservers":
			cur.Nameservers = append(cur.Nameservers, fields[1:]...)
		case "dns-search":
			cur.Search = append(cur.Search, fields[1:]...)
		case "post-up":
			switch l := strings.Join(fields, " "); {
			case eniRouteV6.MatchString(l):
				m := eniRouteV6.FindStringSubmatch(l)
				if m[1] == "default" {
					cur.Routes = append(cur.Routes, defaultRoute(m[2]))
				} else {
					cur.Routes = append(cur.Routes, routeText(m[1], m[2], false))
				}
			case eniDefault.MatchString(l):
				cur.Routes = append(cur.Routes, defaultRoute(eniDefault.FindStringSubmatch(l)[1]))
			case eniRouteV4.MatchString(l):
				m := eniRouteV4.FindStringSubmatch(l)
				cur.Routes = append(cur.Routes, routeText(m[1], m[2], false))
			default:
				cur.Problems = append(cur.Problems, "unparsed: "+l)
			}
		}
	}
	return res
}

func parseNM(t *testing.T, out string) map[string]*facts {
	res := map[string]*facts{}
	for _, file := range glob(t, filepath.Join(out, "etc/NetworkManager/system-connections/*.nmconnection")) {
		f := &facts{Up: true}
		var name, section string
		for _, line := range readLines(t, file) {
			if strings.HasPrefix(line, "[") {
				section = strings.Trim(line, "[]")
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			inFamily := func(addr string) {
				if strings.Contains(addr, ":") != (section == "ipv6") {
					f.Problems = append(f.Problems, fmt.Sprintf("%s=%s in [%s]", k, v, section))
				}
			}
			switch {
			case section == "connection" && k == "id":
				name = strings.TrimPrefix(v, "cloud-init ")
			case section == "ethernet" && k == "mac-address":
				f.MAC = strings.ToLower(v)
			case section == "ethernet" && k == "mtu":
				f.MTU, _ = strconv.Atoi(v)
			case (section == "ipv4" || section == "ipv6") && k == "method" && v == "auto":
				if section == "ipv4" {
					f.DHCP4 = true
				} else {
					f.DHCP6 = true
				}
			case strings.HasPrefix(k, "address"):
				inFamily(v)
				f.Addresses = append(f.Addresses, v)
			case k == "gateway":
				inFamily(v)
				f.Routes = append(f.Routes, defaultRoute(v))
			case strings.HasPrefix(k, "route"):
				dest, gw, _ := strings.Cut(v, ",")
				inFamily(dest)
				// NetworkManager: a route whose next hop is 0.0.0.0 or :: (or none) is a direct route.
				f.Routes = append(f.Routes, routeText(dest, gw, true))
			case k == "dns":
				for _, ns := range strings.Split(strings.TrimSuffix(v, ";"), ";") {
					inFamily(ns)
					f.Nameservers = append(f.Nameservers, ns)
				}
			case k == "dns-search":
				f.Search = append(f.Search, strings.Split(strings.TrimSuffix(v, ";"), ";")...)
			}
		}
		res[name] = f
	}
	return res
}

// expectFacts is what cloud-init must configure for b, derived from the model directly (not from our
// renderer): DHCP NICs (ipam_mode dhcp, IPv4 only) run DHCPv4, get their IPv6 addresses and IPv6
// gateway statically and DNS from the DHCP server; static NICs get everything.
func expectFacts(b model.BoundInterface) (string, *facts) {
	f := &facts{Up: true, MAC: strings.ToLower(b.MAC.String()), MTU: b.MTU}
	static := b.Addresses
	gateways := b.Gateways
	if b.DHCP {
		f.DHCP4 = true
		static, gateways = nil, nil
		for _, a := range b.Addresses {
			if a.Addr().Is6() {
				static = append(static, a)
			}
		}
		for _, g := range b.Gateways {
			if g.Is6() {
				gateways = append(gateways, g)
			}
		}
	}
	for _, a := range static {
		f.Addresses = append(f.Addresses, a.String())
	}
	for _, g := range gateways {
		f.Routes = append(f.Routes, defaultRoute(g.String()))
	}
	if len(static) > 0 && !b.DHCP {
		for _, ns := range b.DNS.Nameservers {
			f.Nameservers = append(f.Nameservers, ns.String())
		}
		f.Search = append(f.Search, b.DNS.Search...)
		if b.DNS.Domain != "" {
			f.Search = append(f.Search, b.DNS.Domain)
		}
	}
	for _, r := range b.Routes {
		if !r.NextHop.IsValid() || r.NextHop.IsUnspecified() {
			f.Routes = append(f.Routes, onLink(r.Dest.String()))
			continue
		}
		f.Routes = append(f.Routes, r.Dest.String()+" via "+r.NextHop.String())
	}
	f.normalise()
	return guestName(b.Name), f
}

// checkRendered runs every renderer on input and compares each interface with want. quirk adjusts the
// expectation for documented 22.4.2 behaviour of one renderer.
func checkRendered(t *testing.T, input []byte, kind string, macNames map[string]string, want map[string]*facts, quirk func(renderer string, want facts) facts) {
	t.Helper()
	for _, r := range renderers {
		got := netConvert(t, input, kind, r.name, r.distro, macNames)
		var gotNames, wantNames []string
		for name, f := range got {
			f.normalise()
			gotNames = append(gotNames, name)
		}
		for name := range want {
			wantNames = append(wantNames, name)
		}
		assert.ElementsMatch(t, wantNames, gotNames, "renderer %s: interfaces", r.name)
		for name, w := range want {
			g := got[name]
			if !assert.NotNil(t, g, "renderer %s: interface %s missing", r.name, name) {
				continue
			}
			expected := *w
			if quirk != nil {
				expected = quirk(r.name, expected)
			}
			assert.Equal(t, &expected, g, "renderer %s: interface %s\ninput:\n%s", r.name, name, input)
		}
	}
}

// layer2Quirk: a NIC without addresses gets a "manual" subnet in v1 and network_data.json, which the
// 22.4.2 network-manager renderer writes as ipv4.method=auto with may-fail (network_manager.py method_map):
// the same as NM's default for a connection without [ipv4], which is what v2 (no subnet at all) gives.
// eni writes no "auto" line for a v2 NIC without subnets, so the link stays down there: v2 has no form
// for "no addresses, link up" (we only emit v2 when the user's networkData is v2).
func layer2Quirk(format string) func(string, facts) facts {
	return func(renderer string, want facts) facts {
		want = onLinkQuirk(renderer, want)
		if len(want.Addresses) > 0 || want.DHCP4 || want.DHCP6 {
			return want
		}
		switch {
		case renderer == "network-manager" && format != "v2":
			want.DHCP4 = true
		case renderer == "eni" && format == "v2":
			want.Up = false
		}
		return want
	}
}

// onLinkQuirk: cloud-init 22.4.2 has no on-link route form (every renderer reads a gateway), so an on-link
// route goes out with the unspecified address as its gateway. eni renders every such route, and sysconfig
// its IPv6 ones, in a form the kernel refuses (refusedOnLink): the route is missing in such a guest,
// which the README says.
func onLinkQuirk(renderer string, want facts) facts {
	routes := make([]string, 0, len(want.Routes))
	for _, r := range want.Routes {
		dest, ok := strings.CutSuffix(r, " on-link")
		if ok && (renderer == "eni" || renderer == "sysconfig" && strings.Contains(dest, ":")) {
			r = refusedOnLink(dest)
		}
		routes = append(routes, r)
	}
	want.Routes = routes
	want.normalise()
	return want
}

// networkDataQuirk: cloud-init turns a network_data.json "ipv6" network into a "static6" subnet, which
// the 22.4.2 network-manager renderer maps to ipv6.method=auto (network_manager.py method_map) next to the
// static address; 25.1.4 maps it to manual, as for "static". Accepted on 22.4.2: the static address is
// there either way, auto adds only SLAAC/DHCPv6 where a router offers it. We keep the standard OpenStack
// type (other ConfigDrive consumers know no other).
func networkDataQuirk(t *testing.T) func(string, facts) facts {
	static6IsAuto := !since25(t)
	return func(renderer string, want facts) facts {
		want = layer2Quirk("network_data.json")(renderer, want)
		if renderer == "network-manager" && static6IsAuto {
			for _, a := range want.Addresses {
				if strings.Contains(a, ":") {
					want.DHCP6 = true
				}
			}
		}
		return want
	}
}

// batchCases puts every render case into one input per format, so that each renderer runs once per
// format (net-convert costs ~0.3 s of CPU per run and CI has 2 cores). Each NIC gets a unique name and
// MAC; a NIC's rendering does not depend on the others. nameOf maps guest names back to cases.
func batchCases(skip func(renderCase) bool) (ifaces []model.BoundInterface, nameOf map[string]string) {
	nameOf = map[string]string{}
	for i, tc := range renderCases() {
		if skip(tc) {
			continue
		}
		for j, b := range tc.ifaces {
			b.Name = fmt.Sprintf("c%dn%d", i, j)
			b.MAC = mac(fmt.Sprintf("02:00:00:00:%02x:%02x", i, j))
			nameOf[guestName(b.Name)] = tc.name
			ifaces = append(ifaces, b)
		}
	}
	return ifaces, nameOf
}

func TestNetConvert_GeneratedConfigRendersCorrectlyOnEveryRenderer(t *testing.T) {
	requireNetConvert(t)
	formats := []struct {
		name, kind string
		render     func([]model.BoundInterface) ([]byte, error)
		quirk      func(string, facts) facts
	}{
		{"v1", "yaml", RenderNetworkConfigV1, layer2Quirk("v1")},
		{"v2", "yaml", renderNetworkConfigV2, layer2Quirk("v2")},
		{"network_data.json", "network_data.json", renderNetworkDataJSON, networkDataQuirk(t)},
	}
	for _, format := range formats {
		t.Run(format.name, func(t *testing.T) {
			t.Parallel()
			// v2 refuses the cases it cannot express on 22.4.2; TestRender checks that error.
			ifaces, nameOf := batchCases(func(tc renderCase) bool { return format.name == "v2" && tc.errV2 != "" })
			out, err := format.render(ifaces)
			require.NoError(t, err)
			want := map[string]*facts{}
			for _, b := range ifaces {
				name, f := expectFacts(b)
				want[name] = f
			}
			require.Len(t, nameOf, len(want))
			t.Logf("%d interfaces from %d cases", len(want), len(renderCases()))
			checkRendered(t, out, format.kind, nil, want, format.quirk)
			if t.Failed() {
				t.Logf("guest name -> case: %v", nameOf)
			}
		})
	}
}

// The harness must see the 22.4.2 bugs our renderers avoid, or the tests above would prove nothing. On
// cloud-init 25.1.4 both are fixed: the same inputs must then render right, which the harness must see too.
// The sidecar keeps the forms that are right on both (v1 with per-subnet routes and gateway, no "::/0"):
// it cannot know the guest's version.
func TestNetConvert_HarnessDetectsTheFormsThat2242MisRenders(t *testing.T) {
	requireNetConvert(t)
	fixed := since25(t)
	t.Run("v2 route to ::/0 becomes ::/64 on 22.4.2, stays ::/0 on 25", func(t *testing.T) {
		t.Parallel()
		in := []byte(`{"version": 2, "ethernets": {"net1": {"match": {"macaddress": "02:00:00:aa:bb:01"}, "set-name": "net1", ` +
			`"addresses": ["fd00::5/64"], "routes": [{"to": "::/0", "via": "fd00::1"}]}}}`)
		got := netConvert(t, in, "yaml", "networkd", "debian", nil)
		require.Contains(t, got, "net1")
		if fixed {
			assert.Equal(t, []string{"::/0 via fd00::1"}, got["net1"].Routes)
			return
		}
		assert.NotContains(t, got["net1"].Routes, "::/0 via fd00::1")
		assert.Contains(t, got["net1"].Routes, "::/64 via fd00::1")
	})
	t.Run("v2 IPv6 route behind an IPv4 first subnet lands in [ipv4] on 22.4.2, in [ipv6] on 25", func(t *testing.T) {
		t.Parallel()
		in := []byte(`{"version": 2, "ethernets": {"net1": {"match": {"macaddress": "02:00:00:aa:bb:01"}, "set-name": "net1", ` +
			`"addresses": ["10.0.0.5/24", "fd00::5/64"], "routes": [{"to": "fd99::/64", "via": "fd00::1"}]}}}`)
		got := netConvert(t, in, "yaml", "network-manager", "debian", nil)
		require.Contains(t, got, "net1")
		if fixed {
			assert.Empty(t, got["net1"].Problems)
			assert.Contains(t, got["net1"].Routes, "fd99::/64 via fd00::1")
			return
		}
		assert.NotEmpty(t, got["net1"].Problems)
	})
}

// configDriveUnsetProbe asks the cloud-init under test what DataSourceConfigDrive.network_config returns
// once update_metadata_if_supported has reset it for the boot event (sources/__init__.py clears
// "_network_config" to the UNSET sentinel, DataSourceConfigDrive.network_config tests only for None).
const configDriveUnsetProbe = `from cloudinit import sources, distros, helpers
from cloudinit.sources import DataSourceConfigDrive as cd
paths = helpers.Paths({"cloud_dir": "/nonexistent", "run_dir": "/nonexistent"})
ds = cd.DataSourceConfigDrive({}, distros.fetch("debian")("debian", {}, paths), paths)
ds._dirty_cache = True
ds.network_json = {"links": [], "networks": [], "services": []}
ds.clear_cached_attrs((("_network_config", sources.UNSET),))
print(type(ds.network_config).__name__)
`

// The ConfigDrive half of the every-boot part (userdata.go) removes the instance-id instead of asking for
// the boot event, because that event makes ConfigDrive hand apply_network_config the UNSET sentinel
// string ("'str' object has no attribute 'get'"). This checks the premise on the cloud-init under test:
// 22.4.2 and 25.1.4 both still do it. When a cloud-init fixes it, this fails: the workaround may then go
// once the floor has the fix (the sidecar cannot know the guest's version).
func TestConfigDrive_BootEventStillYieldsUnsetNetworkConfig_InstanceIDWorkaroundStillNeeded(t *testing.T) {
	requireNetConvert(t)
	cmd := exec.Command("/usr/bin/python3", "-c", configDriveUnsetProbe)
	if root := os.Getenv(netConvertRootEnv); root != "" {
		cmd = exec.Command("chroot", root, "/usr/bin/python3", "-c", configDriveUnsetProbe)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "probe DataSourceConfigDrive: %s", out)
	v, err := cloudInitVersion()
	require.NoError(t, err)
	assert.Equal(t, "str", strings.TrimSpace(string(out)),
		"cloud-init %s: ConfigDrive's network_config after the boot event's reset is no longer the UNSET string", v)
}
