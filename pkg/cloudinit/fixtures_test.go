package cloudinit

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func mac(s string) netval.MAC {
	hw, err := netval.ParseMAC(s)
	if err != nil {
		panic(err) // test fixtures only
	}
	return hw
}

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// route builds a route; via "" is an on-link route (no next hop).
func route(dest, via string) model.Route {
	r := model.Route{Dest: netip.MustParsePrefix(dest)}
	if via != "" {
		r.NextHop = netip.MustParseAddr(via)
	}
	return r
}

// nic returns a secondary IPv4 interface; cases modify it.
func nic(name, hw string, mod func(*model.BoundInterface)) model.BoundInterface {
	b := model.BoundInterface{
		Name:             name,
		Network:          name + "-net",
		NetworkName:      "ns1/" + name + "-nad",
		PodInterfaceName: "pod0123456789a",
		MAC:              mac(hw),
		MACSource:        model.MACFromVMI,
		PrefixKnown:      true,
		Role:             "secondary",
	}
	if mod != nil {
		mod(&b)
	}
	return b
}

// renderCase is one set of bound interfaces, rendered in every format. errV2 is set when v2 on cloud-init
// 22.4.2 cannot express the case and the renderer must refuse.
type renderCase struct {
	name   string
	ifaces []model.BoundInterface
	errV2  string
}

func renderCases() []renderCase {
	return []renderCase{
		{name: "ipv4-only", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24")
		})}},
		{name: "ipv6-only", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("fd00:10:20::5/64")
		})}},
		{name: "dual-stack-ipv4-primary", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "fd00:10:20::5/64")
			b.Gateways = addrs("10.20.2.1", "fd00:10:20::1")
		})}},
		{name: "dual-stack-ipv6-primary", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("fd00:10:20::5/64", "10.20.2.5/24")
			b.Gateways = addrs("fd00:10:20::1", "10.20.2.1")
		})}},
		{name: "two-sriov-nics", ifaces: []model.BoundInterface{
			nic("sriov1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) { b.Addresses = pfx("10.20.2.5/24") }),
			nic("sriov2", "02:00:00:aa:bb:02", func(b *model.BoundInterface) { b.Addresses = pfx("10.30.2.5/24", "fd00:30::5/64") }),
		}},
		{name: "layer2-secondary", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.MTU = 1400
		})}},
		{name: "primary-role", errV2: "routes of both IP families", ifaces: []model.BoundInterface{nic("udn", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Role = "primary"
			b.Addresses = pfx("10.128.0.5/16", "fd10:128::5/64")
			b.Gateways = addrs("10.128.0.1", "fd10:128::1")
			b.Routes = []model.Route{route("100.65.0.0/16", "10.128.0.1"), route("fd99::/64", "fd10:128::1")}
			b.MTU = 1400
			b.DNS = model.DNS{Nameservers: addrs("172.30.0.10"), Search: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}}
		})}},
		{name: "primary-role-ipv6-routes", ifaces: []model.BoundInterface{nic("udn", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Role = "primary"
			b.Addresses = pfx("10.128.0.5/16", "fd10:128::5/64")
			b.Gateways = addrs("10.128.0.1", "fd10:128::1")
			b.Routes = []model.Route{route("fd99::/64", "fd10:128::1"), route("fd98::/48", "fd10:128::1")}
		})}},
		{name: "localnet-dhcp", ifaces: []model.BoundInterface{nic("localnet", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.DHCP = true
			b.PrefixKnown = false
		})}},
		{name: "localnet-dhcp-dual-stack", ifaces: []model.BoundInterface{nic("localnet", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.DHCP = true
			b.Addresses = pfx("192.168.10.20/24", "fd00:192::20/64")
			b.Gateways = addrs("192.168.10.1")
			b.Routes = []model.Route{route("192.168.20.0/24", "192.168.10.254")}
			b.DNS = model.DNS{Nameservers: addrs("192.168.10.1")}
		})}},
		// ipam_mode dhcp is IPv4 only (OKEP-6224): DHCPv4, and the IPv6 address, gateway and route as given.
		{name: "udn-dhcp-ipv6-static", errV2: "IPv6 routes on a NIC whose first subnet is IPv4 DHCP", ifaces: []model.BoundInterface{nic("udn", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.DHCP = true
			b.Role = "primary"
			b.Addresses = pfx("10.200.0.21/24", "fd20:0:0:1::15/64")
			b.Gateways = addrs("10.200.0.1", "fd20:0:0:1::1")
			b.Routes = []model.Route{route("fd99::/64", "fd20:0:0:1::1")}
			b.DNS = model.DNS{Nameservers: addrs("fd20:0:0:1::53")}
		})}},
		{name: "mtu", ifaces: []model.BoundInterface{nic("jumbo", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24")
			b.MTU = 9000
		})}},
		{name: "dns", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "fd00:10:20::5/64")
			b.DNS = model.DNS{
				Nameservers: addrs("10.96.0.10", "fd00:96::10", "10.96.0.10"),
				Search:      []string{"ns1.svc.cluster.local", "svc.cluster.local"},
				Domain:      "example.org",
			}
		})}},
		{name: "mac-sources", ifaces: []model.BoundInterface{
			nic("fromvmi", "02:00:00:aa:bb:01", func(b *model.BoundInterface) { b.Addresses = pfx("10.1.0.5/24") }),
			nic("fromstatus", "02:00:00:AA:BB:02", func(b *model.BoundInterface) {
				b.MACSource = model.MACFromNetworkStatus
				b.Addresses = pfx("10.2.0.5/24")
			}),
			nic("frompodnets", "02:00:00:aa:bb:03", func(b *model.BoundInterface) {
				b.MACSource = model.MACFromPodNetworks
				b.Addresses = pfx("10.3.0.5/24")
			}),
			nic("fromnetinfo", "02:00:00:aa:bb:04", func(b *model.BoundInterface) {
				b.MACSource = model.MACFromNetworkInfo
				b.Addresses = pfx("10.4.0.5/24")
			}),
		}},
		{name: "prefix-unknown", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.PrefixKnown = false
			b.Addresses = pfx("10.20.2.5/32", "fd00:10:20::5/128")
		})}},
		// OVN-K marshals a nil next hop as "" (on-link); others write the unspecified address.
		{name: "on-link-ipv4", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "fd00:10:20::5/64")
			b.Routes = []model.Route{route("192.168.1.0/24", ""), route("192.168.2.0/24", "0.0.0.0"), route("192.168.3.0/24", "10.20.2.1")}
		})}},
		{name: "on-link-ipv6", ifaces: []model.BoundInterface{nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("fd00:10:20::5/64")
			b.Routes = []model.Route{route("fd99::/64", ""), route("fd98::/64", "::")}
		})}},
		// Two addresses of each family: cloudbase-init applies one network per family (cloudbase.go), the
		// gateway's subnet holds the second IPv4 address, so that one carries the default route.
		{name: "two-addresses-per-family", errV2: "routes of both IP families", ifaces: []model.BoundInterface{nic("multi", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
			b.Addresses = pfx("10.20.2.5/24", "10.20.3.5/24", "fd00:10:20::5/64", "fd00:10:30::5/64")
			b.Gateways = addrs("10.20.3.1", "fd00:10:20::1")
			b.Routes = []model.Route{route("100.65.0.0/16", "10.20.3.1"), route("fd99::/64", "fd00:10:20::1")}
			b.DNS = model.DNS{Nameservers: addrs("10.96.0.10", "fd00:96::10"), Search: []string{"svc.cluster.local"}}
			b.MTU = 1400
		})}},
		{name: "hashed-names", ifaces: []model.BoundInterface{
			nic("eth1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) { b.Addresses = pfx("10.1.0.5/24") }),
			nic("a-very-long-interface-name", "02:00:00:aa:bb:02", func(b *model.BoundInterface) { b.Addresses = pfx("10.2.0.5/24") }),
		}},
	}
}

func goldenPath(parts ...string) string {
	return filepath.Join(append([]string{"testdata", "golden"}, parts...)...)
}

// assertGolden compares got with the golden file, or rewrites it under -update.
func assertGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./pkg/cloudinit -update")
	assert.Equal(t, string(want), string(got), "output differs from %s (go test ./pkg/cloudinit -update rewrites it)", path)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
