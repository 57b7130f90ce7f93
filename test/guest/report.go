package guest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// Markers the guest's report script (userdata.go) writes around the report and each section.
const (
	reportBegin  = "@@report-begin"
	reportEnd    = "@@report-end"
	sectionBegin = "@@begin "
	sectionEnd   = "@@end "
)

// Report is what the guest said about its own network, read from its serial port.
type Report struct {
	Links  []Link
	Routes []Route
	// NetworkdUnits maps a .network file path to its content, as systemd-networkd got it from
	// netplan (cloud-init's renderer on Debian 12).
	NetworkdUnits map[string]string
	// Datasource is cloud-init's own name for what it found, e.g. "DataSourceNoCloud [seed=/dev/vdb]".
	Datasource string
	// StageErrors holds cloud-init's errors per stage (status.json v1.<stage>.errors); empty is good.
	StageErrors map[string][]string
	// UserWork counts the runs of each piece of per-instance user work (userWorkDir/<name>.log lines).
	UserWork map[string]int
	// InstanceID is cloud-init's instance-id (/var/lib/cloud/data/instance-id).
	InstanceID string
	// CloudInitVersion is what the guest's `cloud-init --version` says, e.g. "25.1.4".
	CloudInitVersion string
	// NM is set on a guest where NetworkManager runs (nmcli device show, by device name); nil elsewhere.
	NM map[string]*NMDevice
	// NMConnections maps a NetworkManager keyfile path to its content (what cloud-init rendered).
	NMConnections map[string]string
	// Sections keeps every section's raw text, for failure messages.
	Sections map[string]string
}

// Link is one guest network interface (ip -j addr).
type Link struct {
	Name      string
	MAC       string
	OperState string
	MTU       int
	Addrs     []Addr
}

// Addr is one address of a Link.
type Addr struct {
	Prefix    netip.Prefix
	Scope     string
	Dynamic   bool // from a DHCP lease or SLAAC (limited lifetime)
	Tentative bool // IPv6 DAD not finished
}

// Route is one main-table route (ip -j route).
type Route struct {
	Dst      string // "default" or a CIDR
	Gateway  netip.Addr
	Dev      string
	Protocol string
	IPv6     bool
}

// ipAddrJSON and ipRouteJSON are the parts of iproute2's JSON output the checks need.
type ipAddrJSON struct {
	IfName    string `json:"ifname"`
	Address   string `json:"address"`
	OperState string `json:"operstate"`
	MTU       int    `json:"mtu"`
	AddrInfo  []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
		Scope     string `json:"scope"`
		Dynamic   bool   `json:"dynamic"`
		Tentative bool   `json:"tentative"`
	} `json:"addr_info"`
}

type ipRouteJSON struct {
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Dev      string `json:"dev"`
	Protocol string `json:"protocol"`
}

// ParseLinks reads the guest's links from `ip -j addr`'s output.
func ParseLinks(ipJSON []byte) ([]Link, error) {
	var links []ipAddrJSON
	if err := json.Unmarshal(ipJSON, &links); err != nil {
		return nil, fmt.Errorf("ip -j addr: %w", err)
	}
	out, err := linksOf(links)
	if err != nil {
		return nil, fmt.Errorf("ip -j addr: %w", err)
	}
	return out, nil
}

func linksOf(links []ipAddrJSON) ([]Link, error) {
	var out []Link
	for _, l := range links {
		link := Link{Name: l.IfName, MAC: strings.ToLower(l.Address), OperState: l.OperState, MTU: l.MTU}
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil {
				return nil, fmt.Errorf("link %s: address %q: %w", l.IfName, a.Local, err)
			}
			p, err := addr.Prefix(a.PrefixLen)
			if err != nil {
				return nil, fmt.Errorf("link %s: prefix %s/%d: %w", l.IfName, a.Local, a.PrefixLen, err)
			}
			link.Addrs = append(link.Addrs, Addr{Prefix: netip.PrefixFrom(addr, p.Bits()), Scope: a.Scope, Dynamic: a.Dynamic, Tentative: a.Tentative})
		}
		out = append(out, link)
	}
	return out, nil
}

// ParseReport reads the guest report out of serial output. Carriage returns (the guest tty's
// ONLCR) are ignored; text outside the report markers is ignored.
func ParseReport(serial string) (*Report, error) {
	sections, err := splitSections(serial)
	if err != nil {
		return nil, err
	}
	r := &Report{Sections: sections, NetworkdUnits: map[string]string{}, StageErrors: map[string][]string{}}

	var links []ipAddrJSON
	if err := unmarshalSection(sections, "addr", &links); err != nil {
		return nil, err
	}
	if r.Links, err = linksOf(links); err != nil {
		return nil, fmt.Errorf("report section addr: %w", err)
	}

	for _, fam := range []struct {
		section string
		ipv6    bool
	}{{"route4", false}, {"route6", true}} {
		var routes []ipRouteJSON
		if err := unmarshalSection(sections, fam.section, &routes); err != nil {
			return nil, err
		}
		for _, rt := range routes {
			route := Route{Dst: rt.Dst, Dev: rt.Dev, Protocol: rt.Protocol, IPv6: fam.ipv6}
			if rt.Gateway != "" {
				gw, err := netip.ParseAddr(rt.Gateway)
				if err != nil {
					return nil, fmt.Errorf("report section %s: route %s gateway %q: %w", fam.section, rt.Dst, rt.Gateway, err)
				}
				route.Gateway = gw
			}
			r.Routes = append(r.Routes, route)
		}
	}

	r.NetworkdUnits = splitFiles(sections["networkd"])
	r.UserWork = map[string]int{}
	for path, body := range splitFiles(sections["userwork"]) {
		name := strings.TrimSuffix(strings.TrimPrefix(path, userWorkDir+"/"), ".log")
		r.UserWork[name] = strings.Count(body, "ran\n")
	}
	r.InstanceID = strings.TrimSpace(sections["instance"])
	if f := strings.Fields(sections["version"]); len(f) > 0 {
		r.CloudInitVersion = f[len(f)-1] // "/usr/bin/cloud-init 25.1.4"
	}
	if text, ok := sections["nmcli"]; ok {
		if r.NM, err = parseNMCLI(text); err != nil {
			return nil, err
		}
		r.NMConnections = splitFiles(sections["nmconnections"])
	}

	var status struct {
		V1 map[string]json.RawMessage `json:"v1"`
	}
	if err := unmarshalSection(sections, "cloudinit", &status); err != nil {
		return nil, err
	}
	for key, raw := range status.V1 {
		if key == "datasource" {
			_ = json.Unmarshal(raw, &r.Datasource) // null before a datasource is found
			continue
		}
		var stage struct {
			Errors []string `json:"errors"`
		}
		if json.Unmarshal(raw, &stage) == nil && len(stage.Errors) > 0 {
			r.StageErrors[key] = stage.Errors
		}
	}
	return r, nil
}

// splitSections returns each "@@begin NAME" ... "@@end NAME" block of the report.
func splitSections(serial string) (map[string]string, error) {
	sections := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(serial))
	sc.Buffer(make([]byte, 0, 64*1024), 8<<20)
	var (
		inReport, done bool
		name           string
		body           strings.Builder
	)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == reportBegin:
			inReport = true
		case !inReport:
		case line == reportEnd:
			done = true
		case strings.HasPrefix(line, sectionBegin):
			name = strings.TrimPrefix(line, sectionBegin)
			body.Reset()
		case name != "" && line == sectionEnd+name:
			sections[name] = strings.TrimSpace(body.String())
			name = ""
		case name != "":
			body.WriteString(line)
			body.WriteByte('\n')
		}
		if done {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading guest report: %w", err)
	}
	if !done {
		return nil, fmt.Errorf("guest report incomplete: no %q line (sections read: %s)", reportEnd, strings.Join(sortedKeys(sections), ", "))
	}
	return sections, nil
}

func unmarshalSection(sections map[string]string, name string, v any) error {
	text, ok := sections[name]
	if !ok {
		return fmt.Errorf("guest report has no section %q", name)
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return fmt.Errorf("guest report section %q: %w\n%s", name, err, text)
	}
	return nil
}

// splitFiles splits "# PATH" headed blocks (the report's way of printing several files).
func splitFiles(text string) map[string]string {
	files := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			files[name] = body.String()
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# /") {
			flush()
			name = strings.TrimPrefix(line, "# ")
			body.Reset()
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return files
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// LinkByMAC returns the guest link carrying mac.
func (r *Report) LinkByMAC(mac string) (Link, bool) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return Link{}, false
	}
	for _, l := range r.Links {
		if l.MAC == hw.String() {
			return l, true
		}
	}
	return Link{}, false
}

// GlobalPrefixes returns the link's non-link-local addresses that finished DAD.
func (l Link) GlobalPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, a := range l.Addrs {
		if a.Scope == "global" && !a.Tentative {
			out = append(out, a.Prefix)
		}
	}
	return out
}

// DynamicPrefixes returns the link's global addresses that came with a lifetime (a DHCP lease).
func (l Link) DynamicPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, a := range l.Addrs {
		if a.Scope == "global" && a.Dynamic {
			out = append(out, a.Prefix)
		}
	}
	return out
}

// DefaultRoutes returns the default routes of both families, optionally only through dev.
func (r *Report) DefaultRoutes(dev string) []Route {
	var out []Route
	for _, rt := range r.Routes {
		if rt.Dst == "default" && (dev == "" || rt.Dev == dev) {
			out = append(out, rt)
		}
	}
	return out
}

// RoutesVia returns the non-default routes through dev.
func (r *Report) RoutesVia(dev string) []Route {
	var out []Route
	for _, rt := range r.Routes {
		if rt.Dst != "default" && rt.Dev == dev {
			out = append(out, rt)
		}
	}
	return out
}

// NetworkdUnitFor returns the .network unit that matches mac (netplan writes
// "PermanentMACAddress=" or "MACAddress=" under [Match]), and its path.
func (r *Report) NetworkdUnitFor(mac string) (string, string, bool) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return "", "", false
	}
	for _, path := range sortedKeys(r.NetworkdUnits) {
		body := r.NetworkdUnits[path]
		for _, line := range strings.Split(body, "\n") {
			key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
			if ok && strings.HasSuffix(key, "MACAddress") && strings.EqualFold(strings.TrimSpace(val), hw.String()) {
				return path, body, true
			}
		}
	}
	return "", "", false
}

// UnitValues returns every value of key (e.g. "DHCP") in a systemd unit text.
func UnitValues(unit, key string) []string {
	var out []string
	for _, line := range strings.Split(unit, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && k == key {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// String prints the human part of the report for failure messages.
func (r *Report) String() string {
	var b strings.Builder
	for _, name := range []string{"version", "brief", "netplan", "networkd", "leases", "nmcli", "nmconnections", "cloudinit"} {
		if text, ok := r.Sections[name]; ok {
			// trixie's iproute2 colours its brief output on the guest's serial tty.
			fmt.Fprintf(&b, "--- guest %s ---\n%s\n", name, stripEscapes(text))
		}
	}
	return b.String()
}

// NMDevice is one device as NetworkManager reports it (nmcli -t device show), on the NM guest.
type NMDevice struct {
	Device     string
	HWAddr     string // lower case
	State      string // e.g. "100 (connected)"
	Connection string
	Addrs      []netip.Prefix
	Gateways   []netip.Addr
	Routes     []NMRoute
	// DHCP4 holds the DHCPv4 options of the device's lease (DHCP4.OPTION), empty without one.
	DHCP4 []string
}

// NMRoute is one IP4.ROUTE or IP6.ROUTE of a device: nmcli writes "dst = X, nh = Y, mt = Z".
type NMRoute struct {
	Dst     netip.Prefix
	NextHop netip.Addr // the unspecified address for an on-link route
}

// parseNMCLI reads `nmcli -t -f ... device show`: one "FIELD:value" per line (colons in values escaped
// as "\:"), a blank line between devices.
func parseNMCLI(text string) (map[string]*NMDevice, error) {
	devices := map[string]*NMDevice{}
	var cur *NMDevice
	for _, line := range strings.Split(text, "\n") {
		field, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		value = strings.ReplaceAll(value, `\:`, ":")
		if i := strings.IndexByte(field, '['); i >= 0 {
			field = field[:i]
		}
		if field == "GENERAL.DEVICE" {
			cur = &NMDevice{Device: value}
			devices[value] = cur
			continue
		}
		if cur == nil || value == "" {
			continue
		}
		switch field {
		case "GENERAL.HWADDR":
			cur.HWAddr = strings.ToLower(value)
		case "GENERAL.STATE":
			cur.State = value
		case "GENERAL.CONNECTION":
			cur.Connection = value
		case "IP4.ADDRESS", "IP6.ADDRESS":
			p, err := netip.ParsePrefix(value)
			if err != nil {
				return nil, fmt.Errorf("report section nmcli: device %s %s %q: %w", cur.Device, field, value, err)
			}
			cur.Addrs = append(cur.Addrs, p)
		case "IP4.GATEWAY", "IP6.GATEWAY":
			gw, err := netip.ParseAddr(value)
			if err != nil {
				return nil, fmt.Errorf("report section nmcli: device %s %s %q: %w", cur.Device, field, value, err)
			}
			cur.Gateways = append(cur.Gateways, gw)
		case "IP4.ROUTE", "IP6.ROUTE":
			rt, err := parseNMRoute(value)
			if err != nil {
				return nil, fmt.Errorf("report section nmcli: device %s %s: %w", cur.Device, field, err)
			}
			cur.Routes = append(cur.Routes, rt)
		case "DHCP4.OPTION":
			cur.DHCP4 = append(cur.DHCP4, value)
		}
	}
	return devices, nil
}

func parseNMRoute(value string) (NMRoute, error) {
	var rt NMRoute
	for _, kv := range strings.Split(value, ",") {
		k, v, _ := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch k {
		case "dst":
			rt.Dst, err = netip.ParsePrefix(v)
		case "nh":
			rt.NextHop, err = netip.ParseAddr(v)
		}
		if err != nil {
			return NMRoute{}, fmt.Errorf("route %q: %s: %w", value, k, err)
		}
	}
	if !rt.Dst.IsValid() || !rt.NextHop.IsValid() {
		return NMRoute{}, fmt.Errorf("route %q: want dst and nh", value)
	}
	return rt, nil
}

// NMDeviceByMAC returns the NetworkManager device carrying mac (NM guest only).
func (r *Report) NMDeviceByMAC(mac string) (*NMDevice, bool) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil, false
	}
	for _, name := range sortedKeys(r.NM) {
		if d := r.NM[name]; d.HWAddr == hw.String() {
			return d, true
		}
	}
	return nil, false
}

// GlobalPrefixes returns the device's addresses that are not link-local.
func (d *NMDevice) GlobalPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range d.Addrs {
		if !p.Addr().IsLinkLocalUnicast() {
			out = append(out, p)
		}
	}
	return out
}

// NMConnectionFor returns the keyfile (path and content) whose [ethernet] mac-address is mac.
func (r *Report) NMConnectionFor(mac string) (string, string, bool) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return "", "", false
	}
	for _, path := range sortedKeys(r.NMConnections) {
		body := r.NMConnections[path]
		for _, v := range UnitValues(body, "mac-address") {
			if strings.EqualFold(v, hw.String()) {
				return path, body, true
			}
		}
	}
	return "", "", false
}

// KeyfileValues returns every value of key in section of a NetworkManager keyfile (or any ini text).
func KeyfileValues(keyfile, section, key string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(keyfile, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			cur = strings.Trim(line, "[]")
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && cur == section && k == key {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}
