package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// cniVersion is the only CNI spec version this plugin speaks (https://www.cni.dev/docs/spec/, 1.0.0).
const cniVersion = "1.0.0"

// maxConfigSize bounds what is read from stdin: a conflist entry is a few hundred bytes.
const maxConfigSize = 1 << 20

// Config is the plugin's own conflist entry (plus what the runtime injects: prevResult on CHECK).
type Config struct {
	CNIVersion string           `json:"cniVersion"`
	Name       string           `json:"name"`
	Type       string           `json:"type"`
	Kubeconfig string           `json:"kubeconfig"`
	PluginDir  string           `json:"pluginDir"`
	DataDir    string           `json:"dataDir"`
	PodNetwork PodNetworkConfig `json:"podNetwork"`
	PrevResult json.RawMessage  `json:"prevResult,omitempty"`
}

// PodNetworkConfig is the pod network (eth0): a Linux bridge on the node with one subnet per family.
type PodNetworkConfig struct {
	Bridge   string `json:"bridge"`
	SubnetV4 string `json:"subnetV4"`
	SubnetV6 string `json:"subnetV6"`
	// ServiceSubnets are the cluster's service CIDRs; OVN-K routes them through the pod network's gateway
	// (go-controller/pkg/util/pod_annotation.go serviceCIDRToRoute). Optional.
	ServiceSubnets []string `json:"serviceSubnets,omitempty"`
}

// configError is an invalid config: CNI error code 7 (invalid network config), or 1 for a version mismatch.
type configError struct {
	code uint
	err  error
}

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// parseConfig decodes and validates the plugin's stdin config. Unknown fields are allowed: runtimes add
// their own (runtimeConfig, capabilities, args).
func parseConfig(data []byte) (*Config, error) {
	bad := func(format string, a ...any) error {
		return &configError{code: codeInvalidConfig, err: fmt.Errorf("network config: "+format, a...)}
	}
	if len(data) > maxConfigSize {
		return nil, bad("%d bytes on stdin, more than the %d allowed", len(data), maxConfigSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &configError{code: codeDecode, err: errors.New("network config: stdin is empty")}
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, &configError{code: codeDecode, err: fmt.Errorf("network config: decode stdin: %w", err)}
	}
	if c.CNIVersion != cniVersion {
		return nil, &configError{code: codeIncompatibleVersion,
			err: fmt.Errorf("network config: cniVersion %s is not supported (only %s)", netval.Quote(c.CNIVersion), cniVersion)}
	}
	if c.Name == "" {
		return nil, bad("name is empty")
	}
	if c.Type == "" {
		return nil, bad("type is empty")
	}
	if c.Kubeconfig == "" {
		return nil, bad("kubeconfig is empty")
	}
	for _, d := range []struct{ field, dir string }{{"pluginDir", c.PluginDir}, {"dataDir", c.DataDir}} {
		if !filepath.IsAbs(d.dir) {
			return nil, bad("%s %s is not an absolute path", d.field, netval.Quote(d.dir))
		}
	}
	if err := checkIfName(c.PodNetwork.Bridge); err != nil {
		return nil, bad("podNetwork.bridge: %w", err)
	}
	var err error
	if c.PodNetwork.SubnetV4, err = checkSubnet(c.PodNetwork.SubnetV4, true); err != nil {
		return nil, bad("podNetwork.subnetV4: %w", err)
	}
	if c.PodNetwork.SubnetV6, err = checkSubnet(c.PodNetwork.SubnetV6, false); err != nil {
		return nil, bad("podNetwork.subnetV6: %w", err)
	}
	for i, s := range c.PodNetwork.ServiceSubnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, bad("podNetwork.serviceSubnets[%d]: %w", i, err)
		}
		c.PodNetwork.ServiceSubnets[i] = p.Masked().String()
	}
	return &c, nil
}

// checkSubnet parses a pod-network subnet of one family, with room for a gateway and one pod; it returns
// the canonical (masked) form.
func checkSubnet(s string, v4 bool) (string, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", fmt.Errorf("%s: %w", netval.Quote(s), err)
	}
	if p.Addr().Is4() != v4 || p.Addr().Is4In6() {
		want := "IPv6"
		if v4 {
			want = "IPv4"
		}
		return "", fmt.Errorf("%s is not an %s subnet", s, want)
	}
	if p.Addr().BitLen()-p.Bits() < 2 {
		return "", fmt.Errorf("%s is too small for a gateway and a pod", s)
	}
	return p.Masked().String(), nil
}

// checkIfName applies the kernel's rule for interface names (dev_valid_name): 1-15 bytes, not "." or
// "..", no '/', ':' or whitespace.
func checkIfName(name string) error {
	if name == "" || len(name) > 15 {
		return fmt.Errorf("interface name %s must have 1 to 15 bytes", netval.Quote(name))
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\r\v\f") {
		return fmt.Errorf("interface name %s is not valid", netval.Quote(name))
	}
	return nil
}
