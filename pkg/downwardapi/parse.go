package downwardapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
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
		key := "network " + netval.Quote(iface.Network)
		if seen[iface.Network] {
			return nil, &FieldError{Source: source, Key: key, Field: field("network"), Err: errors.New("duplicate network")}
		}
		seen[iface.Network] = true
		if iface.Mac != "" {
			if err := netval.CheckHardwareAddr(iface.Mac); err != nil {
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
		lineKey = fmt.Sprintf("%s (key %s)", lineKey, netval.Quote(key))
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

// ParseNetworkStatus parses the Multus k8s.v1.cni.cncf.io/network-status annotation: a JSON list of
// entries. It does not check the entries' fields: the annotation lists every interface of the pod, and
// one that is not ours is not our business (a bad nameserver of another network must not stop our VM).
// The model checks the entries it uses with CheckNetworkStatusEntry. An empty value yields (nil, nil).
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
	return statuses, nil
}

// CheckNetworkStatusEntry validates entry i of network-status, one the caller uses: name, ips (bare
// addresses, no prefix), mac, mtu, gateway, dns.nameservers and device-info PCI addresses. The error
// names the entry and the field.
func CheckNetworkStatusEntry(i int, st NetworkStatus) *FieldError {
	key := fmt.Sprintf("[%d] network %s", i, netval.Quote(st.Name))
	if st.Interface != "" {
		key += " (interface " + netval.Quote(st.Interface) + ")"
	}
	fail := func(field string, err error) *FieldError {
		return &FieldError{Source: NetworkStatusAnnotation, Key: key, Field: field, Err: err}
	}
	if st.Name == "" {
		return fail("name", errors.New("empty network name"))
	}
	for j, ip := range st.IPs {
		if _, err := netval.ParseAddr(ip); err != nil {
			return fail(fmt.Sprintf("ips[%d]", j), err)
		}
	}
	if st.Mac != "" {
		if err := netval.CheckHardwareAddr(st.Mac); err != nil {
			return fail("mac", err)
		}
	}
	if err := netval.CheckReportedMTU(st.Mtu); err != nil {
		return fail("mtu", err)
	}
	for j, gw := range st.Gateway {
		if _, err := netval.ParseAddr(gw); err != nil {
			return fail(fmt.Sprintf("gateway[%d]", j), err)
		}
	}
	for j, ns := range st.DNS.Nameservers {
		if _, err := netval.ParseAddr(ns); err != nil {
			return fail(fmt.Sprintf("dns.nameservers[%d]", j), err)
		}
	}
	if f, err := validateDeviceInfo(st.DeviceInfo); err != nil {
		return fail("device-info."+f, err)
	}
	return nil
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
		key := "network " + netval.Quote(name)
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
	var err error
	ips, ipField := listOrLegacy("ip_addresses", r.IPAddresses, "ip_address", r.IPAddress, false)
	if pn.IPAddresses, err = parseAll(ips, ipField, netval.ParsePrefix, fail); err != nil {
		return pn, err
	}
	if pn.MAC, err = netval.ParseMAC(r.MACAddress); err != nil {
		return pn, fail("mac_address", err)
	}
	gws, gwField := listOrLegacy("gateway_ips", r.GatewayIPs, "gateway_ip", r.GatewayIP, true)
	if pn.Gateways, err = parseAll(gws, gwField, netval.ParseAddr, fail); err != nil {
		return pn, err
	}
	for i, rt := range r.Routes {
		dest, err := netval.ParsePrefix(rt.Dest)
		if err != nil {
			return pn, fail(fmt.Sprintf("routes[%d].dest", i), err)
		}
		dest = dest.Masked()
		if dest.Bits() == 0 {
			return pn, fail(fmt.Sprintf("routes[%d].dest", i), errors.New("default route must be given as gateway_ips, not a route"))
		}
		route := PodRoute{Dest: dest}
		if rt.NextHop != "" {
			nh, err := netval.ParseAddr(rt.NextHop)
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
		a, err := netval.ParseAddr(r.IPv6LLAGateway)
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

// listOrLegacy returns an OVN-K list field, or, when it is empty, the deprecated single-stack field older
// OVN-K writes instead, with a function naming entry i for errors (the legacy field with "[0]" only when
// indexLegacy).
func listOrLegacy(field string, list []string, legacyField, legacy string, indexLegacy bool) ([]string, func(int) string) {
	if len(list) == 0 && legacy != "" {
		return []string{legacy}, func(i int) string {
			if indexLegacy {
				return fmt.Sprintf("%s[%d]", legacyField, i)
			}
			return legacyField
		}
	}
	return list, func(i int) string { return fmt.Sprintf("%s[%d]", field, i) }
}

// parseAll parses every entry of a list field; the first bad one fails, named by field.
func parseAll[T any](list []string, field func(int) string, parse func(string) (T, error), fail func(string, error) error) ([]T, error) {
	var out []T
	for i, s := range list {
		v, err := parse(s)
		if err != nil {
			return nil, fail(field(i), err)
		}
		out = append(out, v)
	}
	return out, nil
}

// validateDeviceInfo checks the PCI addresses a binding would hand to libvirt, with the rule of
// netval.ParsePCIAddress that domain.Apply applies later; it returns the failing field relative to the
// device-info object.
func validateDeviceInfo(d *DeviceInfo) (string, error) {
	if d == nil {
		return "", nil
	}
	check := func(field, addr string) (string, error) {
		if addr == "" {
			return "", nil
		}
		if _, err := netval.ParsePCIAddress(addr); err != nil {
			return field, err
		}
		return "", nil
	}
	if d.Pci != nil {
		if f, err := check("pci.pci-address", d.Pci.PciAddress); err != nil {
			return f, err
		}
		if f, err := check("pci.pf-pci-address", d.Pci.PfPciAddress); err != nil {
			return f, err
		}
	}
	if d.Vdpa != nil {
		return check("vdpa.pci-address", d.Vdpa.PciAddress)
	}
	return "", nil
}
