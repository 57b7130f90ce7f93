package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// printReport writes render's text output: the header, then one function per section, in this order.
func printReport(w io.Writer, r *pipeline.Report) {
	name := r.VMI.Name
	if r.VMI.Namespace != "" {
		name = r.VMI.Namespace + "/" + name
	}
	fmt.Fprintf(w, "VMI %s: %d interface(s) bound to %q\n", cmp.Or(name, "(unnamed)"), len(r.BoundInterfaces), r.BindingName)
	for _, i := range r.Interfaces {
		printInterface(w, i)
	}
	printWarnings(w, r.Warnings)
	printMissing(w, r.Missing)
	if r.Failure != nil {
		fmt.Fprintf(w, "\n== the %s hook would fail (exit code 1)\n   %s\n", r.Failure.Hook, r.Failure.Message)
		return
	}
	if r.DomainXML != "" {
		section(w, "libvirt domain devices (OnDefineDomain)", r.DomainXML)
	}
	if len(r.Interfaces) > 0 {
		printCloudInit(w, r.CloudInit)
	}
	printCache(w, r.InterfaceCache)
}

func printInterface(w io.Writer, i pipeline.ReportInterface) {
	head := "network " + i.Network
	if i.NetworkName != "" {
		head += " -> " + i.NetworkName
	}
	if i.PodInterfaceName != "" {
		head += ", pod interface " + i.PodInterfaceName
	}
	fmt.Fprintf(w, "\n== interface %s (%s)\n", i.Name, head)
	if i.MAC != "" {
		fmt.Fprintf(w, "   MAC        %s (from %s)\n", i.MAC, i.MACSource)
	} else {
		fmt.Fprintf(w, "   MAC        not known yet (no source has one)\n")
	}
	mode := map[string]string{
		"dhcp":   "DHCP (pod-networks ipam_mode)",
		"manual": "manual (no addresses: the link is brought up without IP config)",
		"static": "static",
	}[i.Mode]
	if i.Role != "" {
		mode += ", role " + i.Role
	}
	fmt.Fprintf(w, "   mode       %s\n", mode)
	line := func(label string, items []string, suffix string) {
		if len(items) > 0 {
			fmt.Fprintf(w, "   %-10s %s%s\n", label, strings.Join(items, ", "), suffix)
		}
	}
	guessed := ""
	if !i.PrefixKnown && len(i.Addresses) > 0 {
		guessed = " (prefix guessed: network-status has none)"
	}
	line("addresses", i.Addresses, guessed)
	line("gateways", i.Gateways, "")
	routes := make([]string, 0, len(i.Routes))
	for _, rt := range i.Routes {
		routes = append(routes, rt.Destination+" via "+rt.NextHop)
	}
	line("routes", routes, "")
	line("DNS", i.DNS.Nameservers, "")
	search := i.DNS.Search
	if i.DNS.Domain != "" {
		search = append([]string{i.DNS.Domain}, search...)
	}
	if len(search) > 0 {
		fmt.Fprintf(w, "   %-10s %s\n", "search", strings.Join(search, " "))
	}
	if i.MTU > 0 {
		fmt.Fprintf(w, "   %-10s %d\n", "MTU", i.MTU)
	}
	vf := "host " + cmp.Or(i.HostPCIAddress, "PCI address not known yet")
	if i.DeviceType != "" {
		vf += " (" + i.DeviceType + ")"
	}
	if i.GuestPCIAddress != "" {
		vf += " -> guest " + i.GuestPCIAddress
	}
	fmt.Fprintf(w, "   %-10s %s, alias %s\n", "VF", vf, i.HostdevAlias)
}

func printWarnings(w io.Writer, warnings []pipeline.Warning) {
	if len(warnings) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== warnings")
	for _, x := range warnings {
		if x.Interface != "" {
			fmt.Fprintf(w, "   [%s] interface %s: %s\n", x.Code, x.Interface, x.Message)
		} else {
			fmt.Fprintf(w, "   [%s] %s\n", x.Code, x.Message)
		}
	}
}

func printMissing(w io.Writer, missing []pipeline.ReportMissing) {
	if len(missing) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== still missing: the hooks would wait for these, then fail (exit code 3)")
	for _, m := range missing {
		fmt.Fprintf(w, "   %s: %s\n", m.Hook, m.Text)
	}
}

func printCloudInit(w io.Writer, c *pipeline.ReportCloudInit) {
	if c == nil {
		return
	}
	body := c.NetworkData
	var pretty bytes.Buffer
	if c.DataSource == "configDrive" && json.Indent(&pretty, []byte(body), "", "  ") == nil {
		body = pretty.String()
	}
	title := map[string]string{"noCloud": "NoCloud network-config", "configDrive": "ConfigDrive network_data.json"}[c.DataSource]
	section(w, fmt.Sprintf("%s (PreCloudInitIso, volume %s, merged with the VMI's networkData)", title, c.VolumeName), body)
}

func printCache(w io.Writer, entries []pipeline.ReportCacheEntry) {
	if len(entries) == 0 {
		return
	}
	var cache strings.Builder
	for _, e := range entries {
		var compact bytes.Buffer
		if json.Compact(&compact, e.Data) != nil {
			compact.Write(e.Data)
		}
		fmt.Fprintf(&cache, "<iface-cache-dir>/%s: %s\n", e.Path, compact.Bytes())
	}
	section(w, "PodIfaceCacheData (KubeVirt's format, read by pkg/network/cache)", cache.String())
}

func section(w io.Writer, title, body string) {
	fmt.Fprintf(w, "\n== %s\n%s", title, body)
	if !strings.HasSuffix(body, "\n") {
		fmt.Fprintln(w)
	}
}
