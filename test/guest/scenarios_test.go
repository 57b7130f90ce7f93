package guest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kvv1 "kubevirt.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/ovn"
)

// scenario is one VM started once or more on one disk; include, when set, is served to the guest at
// http://includeHost/ (the user's #include).
type scenario struct {
	name    string // the behaviour, as the subtest name
	starts  []start
	include string
	// matrix: the scenario runs on every image of the matrix, not only on the floor image (the
	// restarts on NoCloud and ConfigDrive, MIME, no user data, on-link route, dual-stack VF).
	matrix bool
	// smoke: the scenario is one of the smoke boots (GUEST_MATRIX=smoke, on the floor image).
	smoke bool
	// cluster: make test-cluster boots this scenario on the floor image through KubeVirt itself (test/cluster:
	// the same Debian 12 guest, a dual-stack secondary VF and a DHCP pod NIC, from the ISO virt-launcher builds
	// out of our answer), so the full matrix leaves that cell out; the smoke run keeps it.
	cluster bool
}

// runsOn says whether the scenario runs on the floor image (floor) or another image of the matrix, in
// the full matrix or the smoke run.
func (sc scenario) runsOn(floor, smoke bool) bool {
	if smoke {
		return floor && sc.smoke
	}
	if floor && sc.cluster {
		return false
	}
	return floor || sc.matrix
}

// start is one start of the VM: a new pod (annotations) and VMI (new UID); check asserts on the
// guest's own report.
type start struct {
	vmi         *kvv1.VirtualMachineInstance
	labels      map[string]string
	annotations map[string]string
	// kubevirtPodMAC is the pod interface's MAC that KubeVirt's tap generator writes into the domain
	// for a pod NIC without macAddress before OnDefineDomain ("" = leave the domain without one).
	kubevirtPodMAC string
	check          func(t *testing.T, r *Report)
}

// includeHost is where the guest finds the user's #include (qemu guestfwd on the pod NIC).
const includeHost = "10.0.2.100"

// MACs and addresses of the fixtures. 02:... MACs are locally administered: what a user sets in
// the VMI and SR-IOV CNI/OVN-K then program as the VF's MAC.
const (
	podNICMAC       = "02:00:00:00:00:01"
	secondaryMAC    = "02:00:00:0a:00:05"
	primaryMAC      = "02:00:00:14:00:05"
	dhcpMAC         = "02:00:00:1e:00:05"
	dhcpUDNMAC      = "02:00:00:1e:00:06"
	secondaryNAD    = namespace + "/l2-secondary"
	primaryNAD      = namespace + "/l2-primary"
	dhcpNAD         = namespace + "/localnet-dhcp"
	dhcpUDNNAD      = namespace + "/localnet-dhcp-dual-stack"
	userStaticAddr  = "192.0.2.10/24"
	userStaticGW    = "192.0.2.1"
	datasourceNoCld = "DataSourceNoCloud"
	datasourceCD    = "DataSourceConfigDrive"
)

var (
	podNIC      = vmiIface{Name: "default", MAC: podNICMAC}
	secondary   = vmiIface{Name: "l2sec", MAC: secondaryMAC, NAD: secondaryNAD}
	primary     = vmiIface{Name: "udn", MAC: primaryMAC, NAD: primaryNAD}
	dhcpIface   = vmiIface{Name: "dhcpnet", MAC: dhcpMAC, NAD: dhcpNAD}
	dhcpUDN     = vmiIface{Name: "dhcpudn", MAC: dhcpUDNMAC, NAD: dhcpUDNNAD}
	secondaryL2 = attachment{
		Iface: secondary,
		// OVN-K layer2 secondary: addresses, a tunnel id, no gateway, no routes.
		Net:       ovn.PodNetwork{IPAddresses: []string{"10.200.0.5/24", "fd10:200::5/64"}, MACAddress: secondaryMAC, TunnelID: 7, Role: "secondary"},
		PCI:       "0000:65:00.2",
		StatusIPs: []string{"10.200.0.5", "fd10:200::5"},
	}
	primaryL2 = attachment{
		Iface: primary,
		// OVN-K layer2 primary, dual-stack: gateways, and routes to the service CIDRs and the UDN
		// join subnet (go-controller pkg/allocator/pod/pod_annotation.go AddRoutesGatewayIP).
		Net: ovn.PodNetwork{
			IPAddresses: []string{"10.100.0.5/16", "fd10:100::5/64"}, MACAddress: primaryMAC,
			GatewayIPs: []string{"10.100.0.1", "fd10:100::1"},
			Routes: []ovn.PodRoute{
				{Dest: "10.96.0.0/16", NextHop: "10.100.0.1"}, {Dest: "100.65.0.0/16", NextHop: "10.100.0.1"},
				{Dest: "fd00:10:96::/112", NextHop: "fd10:100::1"}, {Dest: "fd99::/64", NextHop: "fd10:100::1"},
			},
			TunnelID: 5, Role: "primary",
		},
		PCI:           "0000:65:00.3",
		StatusIPs:     []string{"10.100.0.5", "fd10:100::5"},
		StatusGateway: []string{"10.100.0.1", "fd10:100::1"},
		StatusDefault: true,
	}
	dhcpLocalnet = attachment{
		Iface: dhcpIface,
		// OKEP-6224's proposed ipam_mode "dhcp": no addresses from OVN-K, the guest asks DHCP.
		Net: ovn.PodNetwork{MACAddress: dhcpMAC, Role: "secondary", IPAMMode: "dhcp"},
		PCI: "0000:65:00.4",
	}
	// A localnet UDN in DHCP mode once ovnkube-node reported the lease it discovered at CNI ADD (OKEP-6224,
	// ovn-kubernetes #6666: in pod-networks with gateway_ips, and in the CNI result, hence network-status),
	// with an IPv6 address and route given beside it: ipam_mode dhcp is IPv4 only, so the guest must run
	// DHCPv4 (the server's answer, not the reported lease, configures IPv4) and hold the IPv6 statically.
	dhcpUDNLease = attachment{
		Iface: dhcpUDN,
		Net: ovn.PodNetwork{
			IPAddresses: []string{"10.1.192.213/24", "fd20:0:0:1::15/64"}, MACAddress: dhcpUDNMAC,
			GatewayIPs: []string{"10.1.192.1"},
			Routes:     []ovn.PodRoute{{Dest: "fd98::/64", NextHop: "fd20:0:0:1::1"}},
			Role:       "secondary", IPAMMode: "dhcp",
		},
		PCI:       "0000:65:00.6",
		StatusIPs: []string{"10.1.192.213", "fd20:0:0:1::15"},
	}
)

// userNetworkDataV2 is the user's own networkData: a static address and default route on the
// pod NIC, which is not bound to us. The sidecar must keep it and add its own NIC beside it.
func userNetworkDataV2() (string, error) {
	return marshalYAML(map[string]any{
		"version": 2,
		"ethernets": map[string]any{
			"podnic": map[string]any{
				"match":     map[string]any{"macaddress": podNICMAC},
				"set-name":  "podnic",
				"addresses": []string{userStaticAddr},
				"gateway4":  userStaticGW,
			},
		},
	})
}

func buildScenarios() ([]scenario, error) {
	userData, err := cloudConfigUserData("runcmd")
	if err != nil {
		return nil, err
	}
	userNetworkData, err := userNetworkDataV2()
	if err != nil {
		return nil, err
	}
	type def struct {
		name        string
		vmiName     string
		ifaces      []vmiIface
		ci          cloudInitVolume
		defaultRole string
		atts        []attachment
		check       func(t *testing.T, r *Report)
		matrix      bool
		smoke       bool
		cluster     bool
	}
	defs := []def{
		{
			name:    "NoCloud_Layer2SecondaryDualStack_AddressesUpAndNoDefaultRouteThroughIt",
			vmiName: "guest-l2-secondary",
			matrix:  true,
			smoke:   true,
			cluster: true,
			ifaces:  []vmiIface{podNIC, secondary},
			ci:      cloudInitVolume{UserData: userData},
			// The cluster network stays primary: the VF is a secondary network.
			defaultRole: "primary",
			atts:        []attachment{secondaryL2},
			check: func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceNoCld)
				checkAddresses(t, r, secondaryMAC, "10.200.0.5/24", "fd10:200::5/64")
				checkNoDefaultRoute(t, r, secondaryMAC)
				// No user networkData: our config replaces cloud-init's DHCP fallback, so the pod
				// NIC must still get its DHCP from it.
				checkDHCP(t, r, podNICMAC)
			},
		},
		{
			name:        "NoCloud_RolePrimary_DefaultRoutesAndServiceRoutesThroughBoundNIC",
			vmiName:     "guest-l2-primary",
			ifaces:      []vmiIface{primary},
			ci:          cloudInitVolume{UserData: userData},
			defaultRole: "infrastructure-locked",
			atts:        []attachment{primaryL2},
			check: func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceNoCld)
				checkPrimary(t, r)
			},
		},
		{
			name:        "ConfigDrive_RolePrimary_NetworkDataJSONAppliedWithDefaultRoutes",
			vmiName:     "guest-configdrive",
			smoke:       true,
			ifaces:      []vmiIface{primary},
			ci:          cloudInitVolume{ConfigDrive: true, UserData: userData},
			defaultRole: "infrastructure-locked",
			atts:        []attachment{primaryL2},
			check: func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceCD)
				checkPrimary(t, r)
			},
		},
		{
			name:        "NoCloud_UserNetworkDataForOtherNIC_KeptAndAppliedBesideBoundNIC",
			vmiName:     "guest-user-networkdata",
			ifaces:      []vmiIface{podNIC, secondary},
			ci:          cloudInitVolume{UserData: userData, NetworkData: userNetworkData},
			defaultRole: "primary",
			atts:        []attachment{secondaryL2},
			check: func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceNoCld)
				t.Run("UserNICKept", func(t *testing.T) {
					checkAddresses(t, r, podNICMAC, userStaticAddr)
					checkDefaultRoutes(t, r, podNICMAC, userStaticGW)
				})
				t.Run("BoundNICAdded", func(t *testing.T) {
					checkAddresses(t, r, secondaryMAC, "10.200.0.5/24", "fd10:200::5/64")
					checkNoDefaultRoute(t, r, secondaryMAC)
				})
			},
		},
		{
			name:        "NoCloud_IPAMModeDHCP_GuestRunsDHCPClientOnBoundNIC",
			vmiName:     "guest-dhcp",
			ifaces:      []vmiIface{dhcpIface},
			ci:          cloudInitVolume{UserData: userData},
			defaultRole: "primary",
			atts:        []attachment{dhcpLocalnet},
			check: func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceNoCld)
				checkDHCP(t, r, dhcpMAC)
			},
		},
		{
			name:        "NoCloud_IPAMModeDHCPWithLeaseAndIPv6_DHCPv4OnlyAndTheIPv6Static",
			vmiName:     "guest-dhcp-udn",
			ifaces:      []vmiIface{dhcpUDN},
			ci:          cloudInitVolume{UserData: userData},
			defaultRole: "primary",
			atts:        []attachment{dhcpUDNLease},
			check: func(t *testing.T, r *Report) {
				checkCloudInitClean(t, r, datasourceNoCld)
				checkDHCP(t, r, dhcpUDNMAC)
				checkNoDHCPv6(t, r, dhcpUDNMAC)
				checkStaticAddresses(t, r, dhcpUDNMAC, "fd20:0:0:1::15/64")
				checkRoute(t, r, dhcpUDNMAC, "fd98::/64", "fd20:0:0:1::1")
			},
		},
	}

	out := make([]scenario, 0, len(defs)+5)
	for _, d := range defs {
		vmi := newVMI(d.vmiName, d.ifaces, d.ci)
		ann, err := podAnnotations(vmi, d.defaultRole, d.atts)
		if err != nil {
			return nil, err
		}
		out = append(out, scenario{name: d.name, matrix: d.matrix, smoke: d.smoke, cluster: d.cluster,
			starts: []start{{vmi: vmi, labels: podLabels(vmi), annotations: ann, check: d.check}}})
	}
	more, err := podNICScenarios()
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}

// checkPrimary asserts what role primary means in the guest: the pod-networks addresses, both
// default routes through the bound NIC to the OVN-K gateways, and the service/join routes.
func checkPrimary(t *testing.T, r *Report) {
	t.Helper()
	checkAddresses(t, r, primaryMAC, "10.100.0.5/16", "fd10:100::5/64")
	checkDefaultRoutes(t, r, primaryMAC, "10.100.0.1", "fd10:100::1")
	checkRoute(t, r, primaryMAC, "10.96.0.0/16", "10.100.0.1")
	checkRoute(t, r, primaryMAC, "fd00:10:96::/112", "fd10:100::1")
}

func checkCloudInitClean(t *testing.T, r *Report, datasource string) {
	t.Helper()
	assert.Truef(t, strings.HasPrefix(r.Datasource, datasource), "cloud-init datasource %q, want %s...", r.Datasource, datasource)
	assert.Emptyf(t, r.StageErrors, "cloud-init reported errors")
}

func guestLink(t *testing.T, r *Report, mac string) Link {
	t.Helper()
	l, ok := r.LinkByMAC(mac)
	require.Truef(t, ok, "the guest has no NIC with MAC %s", mac)
	return l
}

func checkAddresses(t *testing.T, r *Report, mac string, want ...string) {
	t.Helper()
	l := guestLink(t, r, mac)
	var got []string
	for _, p := range l.GlobalPrefixes() {
		got = append(got, p.String())
	}
	assert.ElementsMatchf(t, want, got, "global addresses of guest NIC %s (%s)", l.Name, mac)
	assert.Equalf(t, "UP", l.OperState, "operational state of guest NIC %s (%s)", l.Name, mac)
	if d, ok := nmDevice(t, r, mac); ok {
		var nm []string
		for _, p := range d.GlobalPrefixes() {
			nm = append(nm, p.String())
		}
		assert.ElementsMatchf(t, want, nm, "nmcli: addresses of device %s (%s)", d.Device, mac)
		assert.Truef(t, strings.HasPrefix(d.State, "100 "), "nmcli: device %s (%s) state %q, want 100 (connected)", d.Device, mac, d.State)
	}
}

// nmDevice returns NetworkManager's view of the NIC with mac on the NM guest (ok false elsewhere); the
// checks then assert through nmcli what they assert through ip.
func nmDevice(t *testing.T, r *Report, mac string) (*NMDevice, bool) {
	t.Helper()
	if r.NM == nil {
		return nil, false
	}
	d, ok := r.NMDeviceByMAC(mac)
	require.Truef(t, ok, "nmcli shows no device with MAC %s", mac)
	return d, true
}

func checkNoDefaultRoute(t *testing.T, r *Report, mac string) {
	t.Helper()
	l := guestLink(t, r, mac)
	assert.Emptyf(t, r.DefaultRoutes(l.Name), "default routes through guest NIC %s (%s)", l.Name, mac)
	if d, ok := nmDevice(t, r, mac); ok {
		assert.Emptyf(t, d.Gateways, "nmcli: gateways of device %s (%s)", d.Device, mac)
		for _, rt := range d.Routes {
			assert.NotZerof(t, rt.Dst.Bits(), "nmcli: default route %v on device %s (%s)", rt, d.Device, mac)
		}
	}
}

// checkDefaultRoutes asserts that the guest's default routes, per family given, go through the
// NIC with mac and the given gateways, and through nothing else.
func checkDefaultRoutes(t *testing.T, r *Report, mac string, gateways ...string) {
	t.Helper()
	l := guestLink(t, r, mac)
	for _, gw := range gateways {
		want := netip.MustParseAddr(gw)
		var fam []Route
		for _, rt := range r.DefaultRoutes("") {
			if rt.IPv6 == want.Is6() {
				fam = append(fam, rt)
			}
		}
		if assert.Lenf(t, fam, 1, "IPv6=%v default routes", want.Is6()) {
			assert.Equalf(t, l.Name, fam[0].Dev, "default route device (want guest NIC %s)", mac)
			assert.Equalf(t, want, fam[0].Gateway, "default route gateway")
		}
		if d, ok := nmDevice(t, r, mac); ok {
			assert.Containsf(t, d.Gateways, want, "nmcli: gateways of device %s (%s)", d.Device, mac)
		}
	}
}

func checkRoute(t *testing.T, r *Report, mac, dst, gw string) {
	t.Helper()
	checkNMRoute(t, r, mac, dst, gw)
	l := guestLink(t, r, mac)
	for _, rt := range r.RoutesVia(l.Name) {
		if rt.Dst == dst {
			assert.Equalf(t, netip.MustParseAddr(gw), rt.Gateway, "route %s via guest NIC %s", dst, l.Name)
			return
		}
	}
	assert.Failf(t, "route missing", "no route to %s through guest NIC %s (%s)", dst, l.Name, mac)
}

// checkNMRoute asserts, on the NM guest, that nmcli shows the route to dst on the NIC with mac through
// gw (the unspecified address: on-link).
func checkNMRoute(t *testing.T, r *Report, mac, dst, gw string) {
	t.Helper()
	d, ok := nmDevice(t, r, mac)
	if !ok {
		return
	}
	want := NMRoute{Dst: netip.MustParsePrefix(dst), NextHop: netip.MustParseAddr(gw)}
	assert.Containsf(t, d.Routes, want, "nmcli: routes of device %s (%s)", d.Device, mac)
}

// checkDHCP asserts that the guest runs a DHCPv4 client on the NIC: systemd-networkd's unit says DHCP, or
// on the NM guest the keyfile cloud-init wrote says ipv4 method auto. qemu's user network answers DHCP even
// with restrict=on, so the client also gets a lease; that shows it ran. (On a real VF nothing may answer;
// the configuration is what the sidecar controls.)
func checkDHCP(t *testing.T, r *Report, mac string) {
	t.Helper()
	l := guestLink(t, r, mac)
	if d, ok := nmDevice(t, r, mac); ok {
		path, keyfile, found := r.NMConnectionFor(mac)
		require.Truef(t, found, "no NetworkManager keyfile matches guest NIC %s (%s)", l.Name, mac)
		assert.Equalf(t, []string{"auto"}, KeyfileValues(keyfile, "ipv4", "method"), "%s: [ipv4] method", path)
		assert.NotEmptyf(t, d.DHCP4, "nmcli: device %s (%s) holds no DHCPv4 lease", d.Device, mac)
	} else {
		path, unit, ok := r.NetworkdUnitFor(mac)
		require.Truef(t, ok, "no systemd-networkd unit matches guest NIC %s (%s)", l.Name, mac)
		dhcp := UnitValues(unit, "DHCP")
		assert.Truef(t, len(dhcp) == 1 && (dhcp[0] == "ipv4" || dhcp[0] == "yes"), "%s: DHCP=%v, want ipv4 or yes", path, dhcp)
	}
	var lease []string
	for _, p := range l.DynamicPrefixes() {
		if p.Addr().Is4() {
			lease = append(lease, p.String())
		}
	}
	assert.NotEmptyf(t, lease, "guest NIC %s (%s) holds no DHCPv4 lease", l.Name, mac)
}

// checkNoDHCPv6 asserts that the guest runs no DHCPv6 client on the NIC (ipam_mode dhcp is IPv4 only):
// systemd-networkd's unit says DHCP=ipv4, or on the NM guest the keyfile's [ipv6] method is manual.
func checkNoDHCPv6(t *testing.T, r *Report, mac string) {
	t.Helper()
	l := guestLink(t, r, mac)
	if _, ok := nmDevice(t, r, mac); ok {
		path, keyfile, found := r.NMConnectionFor(mac)
		require.Truef(t, found, "no NetworkManager keyfile matches guest NIC %s (%s)", l.Name, mac)
		assert.Equalf(t, []string{"manual"}, KeyfileValues(keyfile, "ipv6", "method"), "%s: [ipv6] method", path)
		return
	}
	path, unit, ok := r.NetworkdUnitFor(mac)
	require.Truef(t, ok, "no systemd-networkd unit matches guest NIC %s (%s)", l.Name, mac)
	assert.Equalf(t, []string{"ipv4"}, UnitValues(unit, "DHCP"), "%s: DHCP", path)
}

// checkStaticAddresses asserts the NIC's global addresses without a lifetime (not from DHCP): exactly want.
func checkStaticAddresses(t *testing.T, r *Report, mac string, want ...string) {
	t.Helper()
	l := guestLink(t, r, mac)
	dynamic := map[netip.Prefix]bool{}
	for _, p := range l.DynamicPrefixes() {
		dynamic[p] = true
	}
	var got []string
	for _, p := range l.GlobalPrefixes() {
		if !dynamic[p] {
			got = append(got, p.String())
		}
	}
	assert.ElementsMatchf(t, want, got, "static global addresses of guest NIC %s (%s)", l.Name, mac)
}
