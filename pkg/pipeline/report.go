package pipeline

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// RenderDomainXML is the domain Report splices the hostdevs into: a domain with no devices, so that
// the output shows ours alone.
const RenderDomainXML = "<domain type=\"kvm\">\n  <devices>\n  </devices>\n</domain>\n"

// Report results.
const (
	ResultRendered  = "rendered"  // everything rendered; warnings may have been given
	ResultWouldFail = "wouldFail" // a hook would fail: Failure says which and why
	ResultWaiting   = "waiting"   // data is missing: the hooks would wait for Missing, then fail
)

// warnInterfaceCache is the report's warning when the cache would not be (fully) written; the hooks
// log that as a failed refresh instead (pkg/binding RefreshCache).
const warnInterfaceCache = "interface-cache"

// ValidPodIP reports whether s (env MY_POD_IP, render's --pod-ip) is an IP address.
func ValidPodIP(s string) bool {
	_, err := netval.ParseAddr(strings.TrimSpace(s))
	return err == nil
}

// Report is what the hooks would do for a VMI and a snapshot, without waiting: `render`'s output. With
// --format json it is the documented schema (docs/troubleshooting.md "JSON output"): camelCase keys, no nulls
// (lists are [] when empty, optional values are left out).
type Report struct {
	VMI         ReportVMI `json:"vmi"`
	BindingName string    `json:"bindingName"`
	Result      string    `json:"result"` // rendered | wouldFail | waiting
	ExitCode    int       `json:"exitCode"`
	// BoundInterfaces names the VMI interfaces bound to BindingName; Interfaces has what is derived
	// for them (empty when the derivation fails: see Failure).
	BoundInterfaces []string          `json:"boundInterfaces"`
	Interfaces      []ReportInterface `json:"interfaces"`
	Warnings        []Warning         `json:"warnings"`
	Missing         []ReportMissing   `json:"missing"`
	Failure         *ReportFailure    `json:"failure,omitempty"`
	// DomainXML is OnDefineDomain's output for a domain with no devices: only our hostdevs.
	DomainXML string           `json:"domainXML,omitempty"`
	CloudInit *ReportCloudInit `json:"cloudInit,omitempty"`
	// InterfaceCache are the files the sidecar writes under --iface-cache-dir.
	InterfaceCache []ReportCacheEntry `json:"interfaceCache"`
}

// ReportVMI names the VMI.
type ReportVMI struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
}

// ReportInterface is what is derived for one bound interface.
type ReportInterface struct {
	Name             string        `json:"name"`
	Network          string        `json:"network"`
	NetworkName      string        `json:"networkName,omitempty"`
	PodInterfaceName string        `json:"podInterfaceName,omitempty"`
	MAC              string        `json:"mac,omitempty"`
	MACSource        string        `json:"macSource,omitempty"`
	Mode             string        `json:"mode"` // static | dhcp | manual (link up, no IP config)
	Role             string        `json:"role,omitempty"`
	Addresses        []string      `json:"addresses"`
	PrefixKnown      bool          `json:"prefixKnown"`
	Gateways         []string      `json:"gateways"`
	Routes           []ReportRoute `json:"routes"`
	DNS              ReportDNS     `json:"dns"`
	MTU              int           `json:"mtu,omitempty"`
	HostPCIAddress   string        `json:"hostPCIAddress,omitempty"`
	DeviceType       string        `json:"deviceType,omitempty"`
	GuestPCIAddress  string        `json:"guestPCIAddress,omitempty"`
	BootOrder        uint          `json:"bootOrder,omitempty"`
	HostdevAlias     string        `json:"hostdevAlias"`
}

// ReportRoute is one guest route.
type ReportRoute struct {
	Destination string `json:"destination"`
	NextHop     string `json:"nextHop"`
}

// ReportDNS is the resolver configuration of one interface.
type ReportDNS struct {
	Nameservers []string `json:"nameservers"`
	Search      []string `json:"search"`
	Domain      string   `json:"domain,omitempty"`
}

// ReportMissing is one item a hook would wait for.
type ReportMissing struct {
	Hook      string `json:"hook"`
	Interface string `json:"interface,omitempty"`
	Network   string `json:"network,omitempty"`
	Source    string `json:"source"`
	Field     string `json:"field,omitempty"`
	Text      string `json:"text"`
}

// ReportFailure is the error a hook would fail with.
type ReportFailure struct {
	Hook    string `json:"hook"`
	Message string `json:"message"`
}

// ReportCloudInit is the network config PreCloudInitIso would write.
type ReportCloudInit struct {
	DataSource  string `json:"dataSource"` // noCloud | configDrive
	VolumeName  string `json:"volumeName,omitempty"`
	NetworkData string `json:"networkData"`
}

// ReportCacheEntry is one interface cache file.
type ReportCacheEntry struct {
	Path string          `json:"path"` // <vmi-uid>/<interface>, under --iface-cache-dir
	Data json.RawMessage `json:"data"`
}

// Report runs, without waiting, what virt-launcher would have the hooks do, in its order
// (PreCloudInitIso, then OnDefineDomain), through the same steps the hooks run; ExitCode is left to
// the caller.
func (c *Call) Report(snap *downwardapi.Snapshot) *Report {
	vmi := c.vmi
	r := &Report{
		VMI:             ReportVMI{Name: vmi.Name, Namespace: vmi.Namespace, UID: vmi.UID},
		BindingName:     c.opts.BindingName,
		BoundInterfaces: append([]string{}, c.bound...),
		Interfaces:      []ReportInterface{},
		Warnings:        []Warning{},
		Missing:         []ReportMissing{},
		InterfaceCache:  []ReportCacheEntry{},
	}
	defer func() {
		r.Warnings = SortWarnings(r.Warnings)
		switch {
		case r.Failure != nil:
			r.Result = ResultWouldFail
		case len(r.Missing) > 0:
			r.Result = ResultWaiting
		default:
			r.Result = ResultRendered
		}
	}()
	if ifaces, err := c.derive(snap).Interfaces(); err == nil {
		for _, i := range ifaces {
			r.Interfaces = append(r.Interfaces, viewInterface(i))
		}
	}
	failed := func(err error) *Report {
		r.Failure = &ReportFailure{Message: err.Error()}
		var pe *Error
		if errors.As(err, &pe) {
			r.Failure.Hook = pe.Hook
		}
		return r
	}

	ciData, dataSource, notes, hasVolume, err := VolumeCloudInitData(vmi)
	if err != nil {
		return failed(&Error{Hook: PreCloudInitIso, Kind: InvalidInput, Err: err})
	}
	r.Warnings = append(r.Warnings, notes...)
	domainDoc, err := c.parseDomain(context.Background(), []byte(RenderDomainXML))
	if err != nil {
		return failed(err)
	}
	domainNeed, err := c.domainNeed(domainDoc)
	if err != nil {
		return failed(err)
	}
	if hasVolume {
		r.Missing = appendMissing(r.Missing, PreCloudInitIso, c.cloudInitNeed()(snap))
	}
	r.Missing = appendMissing(r.Missing, OnDefineDomain, domainNeed(snap))
	if len(r.Missing) > 0 {
		return r
	}

	if hasVolume {
		res, warnings, err := c.cloudInit(snap, ciData)
		if err != nil {
			return failed(err)
		}
		r.Warnings = append(r.Warnings, warnings...)
		v, _ := cloudInitVolume(vmi)
		r.CloudInit = &ReportCloudInit{DataSource: dataSource, VolumeName: v.Name, NetworkData: string(res.NetworkData)}
	}
	dom, warnings, err := c.domain(snap, []byte(RenderDomainXML), domainDoc)
	if err != nil {
		r.CloudInit = nil // virt-launcher would not start the VM: show the failure, not half the result
		return failed(err)
	}
	r.Warnings = append(r.Warnings, warnings...)
	if !c.Bound() {
		return r // nothing bound: the domain and the cloud-init data pass through, no cache is written
	}
	r.DomainXML = string(dom)

	// The cache refresher never fails a hook (pkg/binding RefreshCache): a problem here is a warning.
	cache, err := c.Cache(snap)
	if err == nil {
		entries, entriesErr := ifacecache.BuildEntries(cache.Spec, cache.Bound, cache.Primary)
		err = entriesErr
		for _, e := range entries {
			raw, err := e.Encode()
			if err != nil {
				continue
			}
			r.InterfaceCache = append(r.InterfaceCache, ReportCacheEntry{Path: vmi.UID + "/" + e.Name, Data: json.RawMessage(bytes.TrimSpace(raw))})
		}
	}
	if err != nil {
		r.Warnings = append(r.Warnings, Warning{Code: warnInterfaceCache, Message: "the interface cache would not be (fully) written: " + err.Error()})
	}
	return r
}

func appendMissing(out []ReportMissing, hook string, items []downwardapi.Missing) []ReportMissing {
	for _, m := range items {
		out = append(out, ReportMissing{Hook: hook, Interface: m.Interface, Network: m.Network, Source: m.Source, Field: m.Field, Text: m.String()})
	}
	return out
}

func viewInterface(i model.BoundInterface) ReportInterface {
	v := ReportInterface{
		Name: i.Name, Network: i.Network, NetworkName: i.NetworkName, PodInterfaceName: i.PodInterfaceName,
		MACSource: string(i.MACSource), Role: i.Role, PrefixKnown: i.PrefixKnown, MTU: i.MTU,
		HostPCIAddress: i.HostPCIAddress, DeviceType: i.DeviceType, GuestPCIAddress: i.GuestPCIAddress,
		HostdevAlias: domain.HostdevAlias(i.Name),
		Addresses:    strs(i.Addresses), Gateways: strs(i.Gateways), Routes: []ReportRoute{},
		DNS: ReportDNS{Nameservers: strs(i.DNS.Nameservers), Search: append([]string{}, i.DNS.Search...), Domain: i.DNS.Domain},
	}
	if !i.MAC.IsZero() {
		v.MAC = i.MAC.String()
	}
	switch {
	case i.DHCP:
		v.Mode = "dhcp"
	case len(i.Addresses) == 0:
		v.Mode = "manual"
	default:
		v.Mode = "static"
	}
	if i.BootOrder != nil {
		v.BootOrder = *i.BootOrder
	}
	for _, rt := range i.Routes {
		v.Routes = append(v.Routes, ReportRoute{Destination: rt.Dest.String(), NextHop: rt.NextHop.String()})
	}
	return v
}

func strs[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

// cloudInitVolume returns the VMI's cloud-init volume as virt-launcher picks it: the first volume
// with cloudInitNoCloud or cloudInitConfigDrive (pkg/cloud-init/cloud-init.go ReadCloudInitVolumeDataSource).
func cloudInitVolume(vmi *model.VirtualMachineInstance) (model.Volume, bool) {
	if vmi == nil {
		return model.Volume{}, false
	}
	for _, v := range vmi.Spec.Volumes {
		if v.CloudInitNoCloud != nil || v.CloudInitConfigDrive != nil {
			return v, true
		}
	}
	return model.Volume{}, false
}

// VolumeCloudInitData builds, from the VMI alone, the CloudInitData JSON virt-launcher would pass to
// PreCloudInitIso: DataSource, VolumeName and the networkData (inline or base64); UserData and metadata
// are left out (render shows network config only). ok is false when the VMI has no cloud-init volume.
// A networkDataSecretRef cannot be read here: it is reported as a warning and rendered as no networkData.
func VolumeCloudInitData(vmi *model.VirtualMachineInstance) (data []byte, dataSource string, warnings []Warning, ok bool, err error) {
	v, ok := cloudInitVolume(vmi)
	if !ok {
		return nil, "", nil, false, nil
	}
	src, dataSource, field := v.CloudInitNoCloud, "noCloud", "cloudInitNoCloud"
	if src == nil {
		src, dataSource, field = v.CloudInitConfigDrive, "configDrive", "cloudInitConfigDrive"
	}
	network := src.NetworkData
	switch {
	case network != "":
	case src.NetworkDataBase64 != "":
		raw, err := base64.StdEncoding.DecodeString(src.NetworkDataBase64)
		if err != nil {
			return nil, "", nil, false, fmt.Errorf("VMI volume %q: %s.networkDataBase64: %w", v.Name, field, err)
		}
		network = string(raw)
	case src.NetworkDataSecretRef != nil:
		warnings = append(warnings, Warning{Code: WarnNetworkDataInSecret, Message: fmt.Sprintf(
			"volume %q takes networkData from Secret %q, which render cannot read: shown as if there were none; "+
				"the hook merges with the Secret's content", v.Name, src.NetworkDataSecretRef.Name)})
	}
	data, err = json.Marshal(map[string]string{"DataSource": dataSource, "NetworkData": network, "VolumeName": v.Name})
	if err != nil {
		return nil, "", nil, false, err
	}
	return data, dataSource, warnings, true, nil
}
