package cloudinit

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// winAdapter is what cloudbase-init leaves on one Windows adapter.
type winAdapter struct {
	MAC     string
	Name    string
	MTU     int
	Address map[model.Family]netip.Prefix
	Gateway map[model.Family]netip.Addr
	DNS     []string
}

// cloudbaseApply replays what cloudbase-init does with a network_data.json on a guest whose adapters have
// the given MACs, as read in its code (see the top of cloudbase.go): links first (adapter found by MAC,
// renamed to the link id, MTU set), then each "ipv4"/"ipv6" network in order (the family's addresses and
// routes replaced by this one address and its default route; DNS replaced by the network's services or,
// without them, the top-level servers of its family). Like cloudbase-init it stops at the first failure
// and returns what was configured until then with the error.
func cloudbaseApply(data []byte, macs []string) (map[string]*winAdapter, error) {
	var nd struct {
		Links []struct {
			ID  string `json:"id"`
			MAC string `json:"ethernet_mac_address"`
			MTU int    `json:"mtu"`
		} `json:"links"`
		Networks []struct {
			Type    string `json:"type"`
			Link    string `json:"link"`
			IP      string `json:"ip_address"`
			Netmask string `json:"netmask"`
			Routes  []struct {
				Network, Netmask, Gateway string
			} `json:"routes"`
			Services []struct{ Type, Address string } `json:"services"`
		} `json:"networks"`
		Services []struct{ Type, Address string } `json:"services"`
	}
	if err := json.Unmarshal(data, &nd); err != nil {
		return nil, err
	}
	byMAC := map[string]*winAdapter{}
	for i, m := range macs {
		byMAC[strings.ToLower(m)] = &winAdapter{MAC: strings.ToLower(m), Name: fmt.Sprintf("Ethernet %d", i+1),
			Address: map[model.Family]netip.Prefix{}, Gateway: map[model.Family]netip.Addr{}}
	}
	out := map[string]*winAdapter{}
	byName := func(name string) *winAdapter {
		for _, a := range byMAC {
			if strings.EqualFold(a.Name, name) {
				return a
			}
		}
		return nil
	}
	for _, l := range nd.Links {
		a := byMAC[strings.ToLower(l.MAC)]
		if a == nil {
			return out, fmt.Errorf("link %q: ItemNotFoundException: no adapter with MAC %s (cloudbase-init #47)", l.ID, l.MAC)
		}
		if other := byName(l.ID); other != nil && other != a {
			return out, fmt.Errorf("link %q: renaming %q: the name is taken", l.ID, a.Name)
		}
		a.Name = l.ID
		if l.MTU != 0 {
			a.MTU = l.MTU
		}
		out[a.Name] = a
	}
	var top4, top6 []string
	for _, s := range nd.Services {
		if s.Type == "dns" {
			if strings.Contains(s.Address, ":") {
				top6 = append(top6, s.Address)
			} else {
				top4 = append(top4, s.Address)
			}
		}
	}
	bits := func(mask string) int {
		m := netip.MustParseAddr(mask).AsSlice()
		n := 0
		for _, b := range m {
			for ; b != 0; b <<= 1 {
				n++
			}
		}
		return n
	}
	for _, n := range nd.Networks {
		if n.Type != "ipv4" && n.Type != "ipv6" {
			continue
		}
		a := byName(n.Link)
		if a == nil {
			return out, fmt.Errorf("network on link %q: no adapter of that name", n.Link)
		}
		addr := netip.MustParseAddr(n.IP)
		f := model.FamilyOf(addr)
		p := netip.PrefixFrom(addr, bits(n.Netmask))
		delete(a.Gateway, f)
		a.Address[f] = p
		for _, r := range n.Routes {
			if bits(r.Netmask) == 0 && strings.Contains(r.Network, ":") == (f == model.IPv6) {
				gw := netip.MustParseAddr(r.Gateway)
				if !p.Masked().Contains(gw) {
					return out, fmt.Errorf("link %q: gateway %s outside %s (cloudbase-init #166)", n.Link, gw, p)
				}
				a.Gateway[f] = gw
				break
			}
		}
		var dns []string
		for _, s := range n.Services {
			if s.Type == "dns" {
				dns = append(dns, s.Address)
			}
		}
		if len(dns) == 0 {
			dns = top4
			if f == model.IPv6 {
				dns = top6
			}
		}
		if len(dns) > 0 {
			a.DNS = dns
		}
	}
	return out, nil
}

// macsOf lists the MACs of ifaces, as the guest has them.
func macsOf(ifaces []model.BoundInterface, extra ...string) []string {
	var out []string
	for _, b := range ifaces {
		out = append(out, b.MAC.String())
	}
	return append(out, extra...)
}

// wantOnWindows is what cloudbase-init must leave on the adapter of b: its guest name, one address per
// family (cloudbasePrimaries' choice), the gateways, every DNS server, the MTU.
func wantOnWindows(t *testing.T, b model.BoundInterface) *winAdapter {
	t.Helper()
	p, err := planNIC(&b)
	require.NoError(t, err)
	w := &winAdapter{MAC: p.mac.String(), Name: p.name, MTU: p.mtu, Address: map[model.Family]netip.Prefix{}, Gateway: map[model.Family]netip.Addr{}}
	for f, j := range cloudbasePrimaries(&p) {
		w.Address[f] = p.static[j]
		if gw := p.gateway(f); gw.IsValid() {
			w.Gateway[f] = gw
		}
	}
	for _, ns := range p.nameservers {
		w.DNS = append(w.DNS, ns.String())
	}
	return w
}

func TestNetworkDataJSON_CloudbaseInitAppliesEachRenderCaseWhole(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			nd, err := renderNetworkDataJSON(tc.ifaces)
			require.NoError(t, err)
			got, err := cloudbaseApply(nd, macsOf(tc.ifaces))
			require.NoError(t, err, "cloudbase-init stops on our data")
			for _, b := range tc.ifaces {
				want := wantOnWindows(t, b)
				a := got[want.Name]
				if !assert.NotNil(t, a, "adapter %s: not renamed to the link id %q", b.Name, want.Name) {
					continue
				}
				assert.Equal(t, want, a, "adapter of %s", b.Name)
			}
		})
	}
}

// ndDoc is the part of a network_data.json the shape tests read.
type ndDoc struct {
	Links []struct {
		ID   string `json:"id"`
		MAC  string `json:"ethernet_mac_address"`
		Name string `json:"name"`
	} `json:"links"`
	Networks []struct {
		ID             string      `json:"id"`
		Type           string      `json:"type"`
		Link           string      `json:"link"`
		Routes         []ndRoute   `json:"routes"`
		DNSNameservers []string    `json:"dns_nameservers"`
		Services       []ndService `json:"services"`
	} `json:"networks"`
}

func decodeND(t *testing.T, data []byte) ndDoc {
	t.Helper()
	var d ndDoc
	require.NoError(t, json.Unmarshal(data, &d))
	return d
}

func TestNetworkDataJSON_Shape(t *testing.T) {
	dual := nic("net1", "02:00:00:aa:bb:01", func(b *model.BoundInterface) {
		b.Addresses = pfx("10.20.2.5/24", "fd00:10:20::5/64")
		b.Gateways = addrs("10.20.2.1", "fd00:10:20::1")
		b.DNS = model.DNS{Nameservers: addrs("10.96.0.10", "fd00:96::10"), Search: []string{"svc.cluster.local"}}
	})
	multi := renderCases()[len(renderCases())-2].ifaces[0]
	require.Equal(t, "multi", multi.Name)
	multi.MAC = mac("02:00:00:aa:bb:02")
	for _, tc := range []struct {
		name   string
		ifaces []model.BoundInterface
		check  func(t *testing.T, d ndDoc)
	}{
		{"DNS of both families as services of one network of the NIC's link, mirroring dns_nameservers", []model.BoundInterface{dual}, func(t *testing.T, d ndDoc) {
			var carriers int
			for _, n := range d.Networks {
				if len(n.Services) == 0 {
					continue
				}
				carriers++
				assert.Equal(t, "net1", n.Link)
				assert.Contains(t, []string{"ipv4", "ipv6"}, n.Type, "on a network cloudbase-init reads")
				var addrs []string
				for _, s := range n.Services {
					assert.Equal(t, "dns", s.Type)
					addrs = append(addrs, s.Address)
				}
				assert.Equal(t, []string{"10.96.0.10", "fd00:96::10"}, addrs)
				assert.Equal(t, n.DNSNameservers, addrs, "newer cloud-init replaces dns_nameservers by services: same list")
			}
			assert.Equal(t, 1, carriers)
		}},
		{"every link has the MAC of a bound interface and its guest name as id", []model.BoundInterface{dual, multi,
			nic("a-very-long-interface-name", "02:00:00:aa:bb:09", func(b *model.BoundInterface) { b.Addresses = pfx("10.9.0.5/24") })},
			func(t *testing.T, d ndDoc) {
				require.Len(t, d.Links, 3)
				for i, b := range []string{"net1", "multi", "a-very-long-interface-name"} {
					assert.Equal(t, guestName(b), d.Links[i].ID)
					assert.Equal(t, d.Links[i].Name, d.Links[i].ID, "Windows and Linux show the same name")
				}
				assert.Equal(t, "02:00:00:aa:bb:01", d.Links[0].MAC)
				assert.Equal(t, "02:00:00:aa:bb:09", d.Links[2].MAC)
			}},
		{"at most one ipv4 and one ipv6 network per link, with the gateway", []model.BoundInterface{multi}, func(t *testing.T, d ndDoc) {
			count := map[string]int{}
			for _, n := range d.Networks {
				count[n.Type]++
				hasDefault := false
				for _, r := range n.Routes {
					hasDefault = hasDefault || r.Netmask == "0.0.0.0" || r.Netmask == "::"
				}
				assert.Equal(t, n.Type == "ipv4" || n.Type == "ipv6", hasDefault, "network %s: the default route is on the applied network", n.ID)
				assert.Equal(t, n.Type == "ipv4" || n.Type == "ipv6", len(n.Routes) > 0, "network %s: routes on the applied network", n.ID)
			}
			assert.Equal(t, map[string]int{"ipv4": 1, "ipv6": 1, "static": 1, "static6": 1}, count)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nd, err := renderNetworkDataJSON(tc.ifaces)
			require.NoError(t, err)
			tc.check(t, decodeND(t, nd))
		})
	}
}

func TestMergeNetworkDataJSON_CloudbaseInit(t *testing.T) {
	ours := mergeIfaces()
	for _, tc := range []struct {
		name string
		user string
		// guest is the MACs of the user's NICs present in the guest.
		guest []string
		// wantErr is the failure cloudbase-init stops on (after configuring ours), "" for none.
		wantErr string
		// globalDNS is, per NIC of ours without DNS servers, what it gets from the user's top-level
		// services: cloudbase-init's default for a network without its own, as cloud-init's global
		// nameservers on networkd (merge_test.go globalDNS).
		globalDNS map[string][]string
	}{
		{name: "user top-level DNS of both families does not replace ours",
			user: `{"links":[{"id":"eth0","type":"phy","ethernet_mac_address":"02:00:00:00:00:10"}],` +
				`"networks":[{"id":"n0","type":"ipv4","link":"eth0","ip_address":"192.168.1.5","netmask":"255.255.255.0"}],` +
				`"services":[{"type":"dns","address":"10.0.0.53"},{"type":"dns","address":"fd00::53"}]}`,
			guest: []string{"02:00:00:00:00:10"}, globalDNS: map[string][]string{"net2": {"10.0.0.53"}}},
		{name: "a user link whose MAC is not in the guest stops cloudbase-init after our links",
			user:    `{"links":[{"id":"ghost","type":"phy","ethernet_mac_address":"02:00:00:00:00:99"}]}`,
			wantErr: "ItemNotFoundException"},
		{name: "a user gateway outside its subnet stops cloudbase-init after our networks",
			user: `{"links":[{"id":"eth0","type":"phy","ethernet_mac_address":"02:00:00:00:00:10"}],` +
				`"networks":[{"id":"n0","type":"ipv4","link":"eth0","ip_address":"192.168.1.5","netmask":"255.255.255.0",` +
				`"routes":[{"network":"0.0.0.0","netmask":"0.0.0.0","gateway":"10.99.0.1"}]}]}`,
			guest: []string{"02:00:00:00:00:10"}, wantErr: "#166"},
		{name: "a user id that differs from ours only in case",
			user:  `{"links":[{"id":"NET1","type":"phy","ethernet_mac_address":"02:00:00:00:00:10"}]}`,
			guest: []string{"02:00:00:00:00:10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := MergeNetworkDataJSON([]byte(tc.user), ours)
			require.NoError(t, err)

			// Ours first: every link and network of ours precedes every one of the user's.
			d, u := decodeND(t, out), decodeND(t, []byte(tc.user))
			nLinks, nNets := len(d.Links)-len(u.Links), len(d.Networks)-len(u.Networks)
			for i, l := range d.Links {
				assert.Equal(t, i < nLinks, l.Name != "", "link %d (%s): ours (with a name) come first", i, l.ID)
			}
			for i, n := range d.Networks {
				isOurs := strings.HasPrefix(n.ID, "net1") || strings.HasPrefix(n.ID, "net2")
				assert.Equal(t, i < nNets, isOurs, "network %d (%s)", i, n.ID)
			}

			got, err := cloudbaseApply(out, macsOf(ours, tc.guest...))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			for _, b := range ours {
				want := wantOnWindows(t, b)
				var a *winAdapter
				for _, ad := range got {
					if ad.MAC == want.MAC {
						a = ad
					}
				}
				if !assert.NotNil(t, a, "our adapter %s was renamed", b.Name) {
					continue
				}
				if tc.wantErr == "ItemNotFoundException" {
					continue // links are all processed before any network: nothing else is configured
				}
				want.Name = a.Name
				if len(want.DNS) == 0 {
					want.DNS = tc.globalDNS[b.Name]
				}
				assert.Equal(t, want, a, "our adapter %s", b.Name)
			}
		})
	}
}

func TestMergeNetworkDataJSON_LinkIDClashIgnoresCase(t *testing.T) {
	out, err := MergeNetworkDataJSON([]byte(`{"links":[{"id":"NET1","type":"phy","ethernet_mac_address":"02:00:00:00:00:10"}]}`), mergeIfaces())
	require.NoError(t, err)
	d := decodeND(t, out)
	require.Len(t, d.Links, 3)
	assert.Equal(t, "net1-1", d.Links[0].ID, "Windows adapter names are case-insensitive")
	assert.Equal(t, "net1", d.Links[0].Name, "the Linux name is kept")
	assert.Equal(t, "NET1", d.Links[2].ID)
}
