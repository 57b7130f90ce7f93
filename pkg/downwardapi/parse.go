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

// decodeJSON decodes data into v. Empty or whitespace-only data means "not written yet": v stays
// untouched and ok is false, with no error.
func decodeJSON(source string, data []byte, v any) (ok bool, err error) {
	if err := checkSize(source, data); err != nil || len(bytes.TrimSpace(data)) == 0 {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, &FieldError{Source: source, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	return true, nil
}

// ParseNetworkInfo parses the device-info file or the kubevirt.io/network-info annotation (same JSON,
// KubeVirt pkg/network/downwardapi/types.go). Empty or whitespace-only input means "not written yet"
// (the file is projected empty until virt-controller adds the annotation): it returns (nil, nil).
func ParseNetworkInfo(source string, data []byte) (*NetworkInfo, error) {
	var info NetworkInfo
	if ok, err := decodeJSON(source, data, &info); !ok {
		return nil, err
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
		if err := netval.CheckReportedMTU(iface.Mtu); err != nil {
			return nil, &FieldError{Source: source, Key: key, Field: field("mtu"), Err: err}
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
	// Only a trailing newline (a hand-written file) is harmless; kubelet writes none.
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		lineKey := fmt.Sprintf("line %d", n+1)
		if line == "" {
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

// ParseNetworkStatus parses the Multus k8s.v1.cni.cncf.io/network-status annotation, a JSON list, without
// checking the entries: a bad nameserver of another network must not stop our VM. The model checks the
// entries it uses with CheckNetworkStatusEntry. An empty value yields (nil, nil).
func ParseNetworkStatus(data []byte) ([]NetworkStatus, error) {
	var statuses []NetworkStatus
	if ok, err := decodeJSON(NetworkStatusAnnotation, data, &statuses); !ok {
		return nil, err
	}
	return statuses, nil
}

// CheckNetworkStatusEntry validates entry i of network-status, one the caller uses: name, ips (bare
// addresses), mac, mtu, gateway, dns.nameservers and device-info PCI addresses.
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

// ParsePodNetworks parses the OVN-Kubernetes k8s.ovn.org/pod-networks annotation with the rules of OVN-K's
// UnmarshalPodAnnotation: ip_addresses may be null (IPAM-less) or fall back to the deprecated ip_address;
// mac_address is required; routes carry no default route. An empty value yields (nil, nil).
func ParsePodNetworks(data []byte) (PodNetworks, error) {
	var raw map[string]*podNetworkJSON
	if ok, err := decodeJSON(PodNetworksAnnotation, data, &raw); !ok {
		return nil, err
	}
	out := make(PodNetworks, len(raw))
	for name, r := range raw {
		key := "network " + netval.Quote(name)
		fail := func(field string, err error) error {
			return &FieldError{Source: PodNetworksAnnotation, Key: key, Field: field, Err: err}
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
	if pn.IPAddresses, err = parseList("ip_addresses", r.IPAddresses, "ip_address", r.IPAddress, netval.ParsePrefix, fail); err != nil {
		return pn, err
	}
	if pn.MAC, err = netval.ParseMAC(r.MACAddress); err != nil {
		return pn, fail("mac_address", err)
	}
	if pn.Gateways, err = parseList("gateway_ips", r.GatewayIPs, "gateway_ip[0]", r.GatewayIP, netval.ParseAddr, fail); err != nil {
		return pn, err
	}
	for i, rt := range r.Routes {
		field := fmt.Sprintf("routes[%d]", i)
		dest, err := netval.ParsePrefix(rt.Dest)
		if err == nil && dest.Bits() == 0 {
			err = errors.New("default route must be given as gateway_ips, not a route")
		}
		if err != nil {
			return pn, fail(field+".dest", err)
		}
		route := PodRoute{Dest: dest.Masked()}
		if rt.NextHop != "" {
			nh, err := netval.ParseAddr(rt.NextHop)
			if err == nil && nh.Is4() != dest.Addr().Is4() {
				err = fmt.Errorf("address family of %s differs from dest %s", nh, route.Dest)
			}
			if err != nil {
				return pn, fail(field+".nextHop", err)
			}
			route.NextHop = nh
		}
		pn.Routes = append(pn.Routes, route)
	}
	if r.IPv6LLAGateway != "" {
		a, err := netval.ParseAddr(r.IPv6LLAGateway)
		if err == nil && !a.Is6() {
			err = fmt.Errorf("%s is not an IPv6 address", a)
		}
		if err != nil {
			return pn, fail("ipv6_lla_gateway_ip", err)
		}
		pn.IPv6LLAGateway = a
	}
	return pn, nil
}

// parseList parses every entry of an OVN-K list field or, when the list is empty, the deprecated
// single-stack field older OVN-K writes instead. The first bad entry fails, named by its field.
func parseList[T any](field string, list []string, legacyField, legacy string, parse func(string) (T, error),
	fail func(string, error) error) ([]T, error) {
	if len(list) == 0 && legacy != "" {
		v, err := parse(legacy)
		if err != nil {
			return nil, fail(legacyField, err)
		}
		return []T{v}, nil
	}
	var out []T
	for i, s := range list {
		v, err := parse(s)
		if err != nil {
			return nil, fail(fmt.Sprintf("%s[%d]", field, i), err)
		}
		out = append(out, v)
	}
	return out, nil
}

// validateDeviceInfo checks the PCI addresses a binding would hand to libvirt (netval.ParsePCIAddress, as
// domain.Apply later does); it returns the failing field relative to the device-info object.
func validateDeviceInfo(d *DeviceInfo) (string, error) {
	type pciField struct{ name, addr string }
	var fields []pciField
	if d != nil && d.Pci != nil {
		fields = append(fields, pciField{"pci.pci-address", d.Pci.PciAddress}, pciField{"pci.pf-pci-address", d.Pci.PfPciAddress})
	}
	if d != nil && d.Vdpa != nil {
		fields = append(fields, pciField{"vdpa.pci-address", d.Vdpa.PciAddress})
	}
	for _, f := range fields {
		if f.addr == "" {
			continue
		}
		if _, err := netval.ParsePCIAddress(f.addr); err != nil {
			return f.name, err
		}
	}
	return "", nil
}
