package downwardapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

var errTooLarge = fmt.Errorf("larger than %d bytes", MaxFileSize)

// checkSize rejects inputs over MaxFileSize before anything parses them.
func checkSize(source string, data []byte) error {
	if len(data) > MaxFileSize {
		return &FieldError{Source: source, Err: errTooLarge}
	}
	return nil
}

// ParseNetworkInfo parses the device-info file or the kubevirt.io/network-info annotation (same JSON,
// KubeVirt pkg/network/downwardapi/types.go). Empty or whitespace-only input means "not written yet"
// (the file is projected empty until virt-controller adds the annotation): it returns (nil, nil).
func ParseNetworkInfo(source string, data []byte) (*NetworkInfo, error) {
	if err := checkSize(source, data); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var info NetworkInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, &FieldError{Source: source, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	seen := make(map[string]bool, len(info.Interfaces))
	for i, iface := range info.Interfaces {
		field := func(f string) string { return fmt.Sprintf("interfaces[%d].%s", i, f) }
		if iface.Network == "" {
			return nil, &FieldError{Source: source, Field: field("network"), Err: errors.New("empty network name")}
		}
		key := "network " + quote(iface.Network)
		if seen[iface.Network] {
			return nil, &FieldError{Source: source, Key: key, Field: field("network"), Err: errors.New("duplicate network")}
		}
		seen[iface.Network] = true
		if iface.Mac != "" {
			if err := validateHardwareAddr(iface.Mac); err != nil {
				return nil, &FieldError{Source: source, Key: key, Field: field("mac"), Err: err}
			}
		}
		if iface.Mtu < 0 || iface.Mtu > 65535 {
			return nil, &FieldError{Source: source, Key: key, Field: field("mtu"), Err: fmt.Errorf("out of range: %d", iface.Mtu)}
		}
		if f, err := validateDeviceInfo(iface.DeviceInfo); err != nil {
			return nil, &FieldError{Source: source, Key: key, Field: field("deviceInfo." + f), Err: err}
		}
	}
	return &info, nil
}

// ParseFormatMap parses a pod-info labels or annotations file written by kubelet's fieldpath.FormatMap
// (k8s.io/kubernetes pkg/fieldpath/fieldpath.go): lines `key="<strconv.Quote(value)>"`, sorted, joined
// by "\n", no trailing newline; an empty map is an empty file. Keys cannot contain '=' (they are
// qualified names), so each line splits at its first '='.
func ParseFormatMap(source string, data []byte) (map[string]string, error) {
	if err := checkSize(source, data); err != nil {
		return nil, err
	}
	m := make(map[string]string)
	if len(data) == 0 {
		return m, nil
	}
	lines := strings.Split(string(data), "\n")
	for n, line := range lines {
		lineKey := fmt.Sprintf("line %d", n+1)
		if line == "" {
			// Only a trailing newline (a hand-written file) is harmless; kubelet writes none.
			if n == len(lines)-1 {
				continue
			}
			return nil, &FieldError{Source: source, Key: lineKey, Err: errors.New("empty line")}
		}
		key, quoted, ok := strings.Cut(line, "=")
		if !ok {
			return nil, &FieldError{Source: source, Key: lineKey, Err: fmt.Errorf("no '=' in the line (%d bytes, not shown: it may hold a secret)", len(line))}
		}
		if key == "" {
			return nil, &FieldError{Source: source, Key: lineKey, Err: errors.New("empty key")}
		}
		lineKey = fmt.Sprintf("%s (key %s)", lineKey, quote(key))
		if !strings.HasPrefix(quoted, `"`) {
			return nil, &FieldError{Source: source, Key: lineKey, Err: errors.New("value is not a double-quoted string")}
		}
		value, err := strconv.Unquote(quoted)
		if err != nil {
			return nil, &FieldError{Source: source, Key: lineKey, Err: fmt.Errorf("unquoting value (%d bytes, not shown: it may hold a secret): %w", len(quoted), err)}
		}
		if _, dup := m[key]; dup {
			return nil, &FieldError{Source: source, Key: lineKey, Err: errors.New("duplicate key")}
		}
		m[key] = value
	}
	return m, nil
}

// ParseNetworkStatus parses and validates the Multus k8s.v1.cni.cncf.io/network-status annotation:
// ips (bare addresses, no prefix), mac, gateway, dns.nameservers and device-info PCI addresses.
// An empty value yields (nil, nil).
func ParseNetworkStatus(data []byte) ([]NetworkStatus, error) {
	const source = NetworkStatusAnnotation
	if err := checkSize(source, data); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var statuses []NetworkStatus
	if err := json.Unmarshal(data, &statuses); err != nil {
		return nil, &FieldError{Source: source, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	for i, st := range statuses {
		key := fmt.Sprintf("[%d] network %s", i, quote(st.Name))
		if st.Interface != "" {
			key += " (interface " + quote(st.Interface) + ")"
		}
		fail := func(field string, err error) error {
			return &FieldError{Source: source, Key: key, Field: field, Err: err}
		}
		if st.Name == "" {
			return nil, fail("name", errors.New("empty network name"))
		}
		for j, ip := range st.IPs {
			if _, err := parseAddr(ip); err != nil {
				return nil, fail(fmt.Sprintf("ips[%d]", j), err)
			}
		}
		if st.Mac != "" {
			if err := validateHardwareAddr(st.Mac); err != nil {
				return nil, fail("mac", err)
			}
		}
		if st.Mtu < 0 || st.Mtu > 65535 {
			return nil, fail("mtu", fmt.Errorf("out of range: %d", st.Mtu))
		}
		for j, gw := range st.Gateway {
			if _, err := parseAddr(gw); err != nil {
				return nil, fail(fmt.Sprintf("gateway[%d]", j), err)
			}
		}
		for j, ns := range st.DNS.Nameservers {
			if _, err := parseAddr(ns); err != nil {
				return nil, fail(fmt.Sprintf("dns.nameservers[%d]", j), err)
			}
		}
		if f, err := validateDeviceInfo(st.DeviceInfo); err != nil {
			return nil, fail("device-info."+f, err)
		}
	}
	return statuses, nil
}

// podNetworkJSON mirrors OVN-Kubernetes' unexported podAnnotation (go-controller/pkg/util/pod_annotation.go).
type podNetworkJSON struct {
	IPAddresses    []string       `json:"ip_addresses"`
	MACAddress     string         `json:"mac_address"`
	GatewayIPs     []string       `json:"gateway_ips"`
	Routes         []podRouteJSON `json:"routes"`
	IPAddress      string         `json:"ip_address"` // deprecated single-stack form
	GatewayIP      string         `json:"gateway_ip"` // deprecated single-stack form
	IPv6LLAGateway string         `json:"ipv6_lla_gateway_ip"`
	TunnelID       int            `json:"tunnel_id"`
	Role           string         `json:"role"`
	IPAMMode       string         `json:"ipam_mode"`
}

type podRouteJSON struct {
	Dest    string `json:"dest"`
	NextHop string `json:"nextHop"`
}

// ParsePodNetworks parses and validates the OVN-Kubernetes k8s.ovn.org/pod-networks annotation with the
// rules of OVN-K's UnmarshalPodAnnotation: ip_addresses may be null (IPAM-less layer2/localnet) and fall
// back to the deprecated ip_address; mac_address is required; routes never carry the default route and
// a nextHop must match its destination's family. An empty value yields (nil, nil).
func ParsePodNetworks(data []byte) (PodNetworks, error) {
	const source = PodNetworksAnnotation
	if err := checkSize(source, data); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var raw map[string]*podNetworkJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, &FieldError{Source: source, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	out := make(PodNetworks, len(raw))
	for name, r := range raw {
		key := "network " + quote(name)
		fail := func(field string, err error) error {
			return &FieldError{Source: source, Key: key, Field: field, Err: err}
		}
		if name == "" {
			return nil, fail("", errors.New("empty network key"))
		}
		if r == nil {
			return nil, fail("", errors.New("null entry"))
		}
		pn, err := convertPodNetwork(r, fail)
		if err != nil {
			return nil, err
		}
		out[name] = pn
	}
	return out, nil
}

func convertPodNetwork(r *podNetworkJSON, fail func(string, error) error) (PodNetwork, error) {
	pn := PodNetwork{TunnelID: r.TunnelID, Role: r.Role, IPAMMode: r.IPAMMode}
	ipField, ips := "ip_addresses", r.IPAddresses
	if len(ips) == 0 && r.IPAddress != "" {
		ipField, ips = "ip_address", []string{r.IPAddress}
	}
	for i, s := range ips {
		p, err := parsePrefix(s)
		if err != nil {
			if ipField == "ip_address" {
				return pn, fail(ipField, err)
			}
			return pn, fail(fmt.Sprintf("%s[%d]", ipField, i), err)
		}
		pn.IPAddresses = append(pn.IPAddresses, p)
	}
	if err := validateMAC(r.MACAddress); err != nil {
		return pn, fail("mac_address", err)
	}
	pn.MAC, _ = net.ParseMAC(r.MACAddress)
	gwField, gws := "gateway_ips", r.GatewayIPs
	if len(gws) == 0 && r.GatewayIP != "" {
		gwField, gws = "gateway_ip", []string{r.GatewayIP}
	}
	for i, s := range gws {
		a, err := parseAddr(s)
		if err != nil {
			return pn, fail(fmt.Sprintf("%s[%d]", gwField, i), err)
		}
		pn.Gateways = append(pn.Gateways, a)
	}
	for i, rt := range r.Routes {
		dest, err := parsePrefix(rt.Dest)
		if err != nil {
			return pn, fail(fmt.Sprintf("routes[%d].dest", i), err)
		}
		dest = dest.Masked()
		if dest.Bits() == 0 {
			return pn, fail(fmt.Sprintf("routes[%d].dest", i), errors.New("default route must be given as gateway_ips, not a route"))
		}
		route := PodRoute{Dest: dest}
		if rt.NextHop != "" {
			nh, err := parseAddr(rt.NextHop)
			if err != nil {
				return pn, fail(fmt.Sprintf("routes[%d].nextHop", i), err)
			}
			if nh.Is4() != dest.Addr().Is4() {
				return pn, fail(fmt.Sprintf("routes[%d].nextHop", i), fmt.Errorf("address family of %s differs from dest %s", nh, dest))
			}
			route.NextHop = nh
		}
		pn.Routes = append(pn.Routes, route)
	}
	if r.IPv6LLAGateway != "" {
		a, err := parseAddr(r.IPv6LLAGateway)
		if err != nil {
			return pn, fail("ipv6_lla_gateway_ip", err)
		}
		if !a.Is6() {
			return pn, fail("ipv6_lla_gateway_ip", fmt.Errorf("%s is not an IPv6 address", a))
		}
		pn.IPv6LLAGateway = a
	}
	return pn, nil
}

// parseAddr accepts a bare IPv4 or IPv6 address; zones and IPv4-mapped IPv6 forms are unmapped or refused
// so that consumers compare families reliably.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("invalid IP address %s", quote(s))
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("invalid IP address %s: zone not allowed", quote(s))
	}
	return a.Unmap(), nil
}

// parsePrefix accepts "addr/bits" and keeps the host bits (pod-networks carries "10.20.2.5/24").
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %s", quote(s))
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %s: IPv4-mapped IPv6", quote(s))
	}
	return p, nil
}

// validateHardwareAddr accepts any link-layer address net.ParseMAC does (EUI-48, EUI-64, 20-byte
// IPoIB): network-status and network-info list every network of the pod, not only ours, and an
// InfiniBand secondary network must not make the whole annotation unusable. Whether a MAC fits a
// guest Ethernet NIC is pkg/model's check, for the interfaces bound to us.
func validateHardwareAddr(s string) error {
	if _, err := net.ParseMAC(s); err != nil {
		return fmt.Errorf("invalid MAC %s", quote(s))
	}
	return nil
}

// validateMAC accepts a 48-bit Ethernet MAC, as OVN-Kubernetes writes in pod-networks.
func validateMAC(s string) error {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return fmt.Errorf("invalid MAC %s", quote(s))
	}
	return nil
}

// validateDeviceInfo checks the PCI addresses a binding would hand to libvirt; it returns the failing
// field relative to the device-info object.
func validateDeviceInfo(d *DeviceInfo) (string, error) {
	if d == nil {
		return "", nil
	}
	if d.Pci != nil {
		if d.Pci.PciAddress != "" && !IsPCIAddress(d.Pci.PciAddress) {
			return "pci.pci-address", fmt.Errorf("invalid PCI address %s", quote(d.Pci.PciAddress))
		}
		if d.Pci.PfPciAddress != "" && !IsPCIAddress(d.Pci.PfPciAddress) {
			return "pci.pf-pci-address", fmt.Errorf("invalid PCI address %s", quote(d.Pci.PfPciAddress))
		}
	}
	if d.Vdpa != nil && d.Vdpa.PciAddress != "" && !IsPCIAddress(d.Vdpa.PciAddress) {
		return "vdpa.pci-address", fmt.Errorf("invalid PCI address %s", quote(d.Vdpa.PciAddress))
	}
	return "", nil
}

// IsPCIAddress accepts the sysfs form domain:bus:device.function ("0000:65:00.2"); the domain may have
// 4 to 8 hex digits (VMD domains are wider than 4), device is 0x00-0x1f, function 0-7.
func IsPCIAddress(s string) bool {
	domain, rest, ok := strings.Cut(s, ":")
	if !ok || len(domain) < 4 || len(domain) > 8 || !isHex(domain) {
		return false
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok || len(bus) != 2 || !isHex(bus) {
		return false
	}
	dev, fn, ok := strings.Cut(rest, ".")
	if !ok || len(dev) != 2 || !isHex(dev) || len(fn) != 1 || fn[0] < '0' || fn[0] > '7' {
		return false
	}
	d, _ := strconv.ParseUint(dev, 16, 8)
	return d <= 0x1f
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return s != ""
}
