package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// samples are the built-in pod and VMI `render --sample` (make demo) uses: a dual-stack layer2
// secondary UDN over an SR-IOV VF, and a localnet network whose IPAM is DHCP.
//
//go:embed samples/pod.json samples/vmi.json
var samples embed.FS

// maxInputSize bounds the pod and VMI files render reads.
const maxInputSize = 8 << 20

// render's exit codes (README "Debugging with render", `render --help`).
const (
	exitRendered = 0 // everything rendered; warnings may have been printed
	exitHookFail = 1 // a hook would fail: the message is the hook's
	exitUsage    = 2 // bad flags or unreadable input
	exitWaiting  = 3 // data is missing: the hooks would wait for it (listed), then fail
)

// warnInterfaceCache is render's warning when the cache would not be (fully) written; the hooks log
// that as a failed refresh instead (pkg/hooks RefreshCache).
const warnInterfaceCache = "interface-cache"

// renderDomainXML is the domain render splices the hostdevs into: a domain with no devices, so that
// the output shows ours alone.
const renderDomainXML = "<domain type=\"kvm\">\n  <devices>\n  </devices>\n</domain>\n"

const renderUsage = `Usage: sriov-udn-binding render (--pod FILE | --pod-info-dir DIR [--device-info-file FILE]) --vmi FILE [flags]
       sriov-udn-binding render --sample [flags]

Shows what the sidecar's hooks would do for a VMI in its virt-launcher pod, by calling the same code
(package pipeline): the interfaces it derives, the <hostdev> elements (OnDefineDomain), the network
config merged into the VMI's own cloud-init datasource (PreCloudInitIso: NoCloud or ConfigDrive), the
interface cache entries, and warnings.

Inputs: --pod takes the virt-launcher Pod object (kubectl get pod NAME -o json, or YAML); --vmi the
VirtualMachineInstance (kubectl get vmi NAME -o json). For a List, take one item: kubectl get ... NAME,
or jq '.items[0]'.

Exit codes:
  0  rendered (warnings, if any, are printed)
  1  a hook would fail; the message is the hook's
  2  bad usage or unreadable input
  3  data is missing: the hooks would wait for it (up to --wait-timeout), then fail; the items are listed

Flags:
`

// renderReport is render's output; with --format json it is the documented schema (README "render
// --format json"): camelCase keys, no nulls (lists are [] when empty, optional values are left out).
type renderReport struct {
	VMI         reportVMI `json:"vmi"`
	BindingName string    `json:"bindingName"`
	Result      string    `json:"result"` // rendered | wouldFail | waiting
	ExitCode    int       `json:"exitCode"`
	// BoundInterfaces names the VMI interfaces bound to BindingName; Interfaces has what is derived
	// for them (empty when the derivation fails: see Failure).
	BoundInterfaces []string           `json:"boundInterfaces"`
	Interfaces      []reportInterface  `json:"interfaces"`
	Warnings        []pipeline.Warning `json:"warnings"`
	Missing         []reportMissing    `json:"missing"`
	Failure         *reportFailure     `json:"failure,omitempty"`
	// DomainXML is OnDefineDomain's output for a domain with no devices: only our hostdevs.
	DomainXML string           `json:"domainXML,omitempty"`
	CloudInit *reportCloudInit `json:"cloudInit,omitempty"`
	// InterfaceCache are the files the sidecar writes under --iface-cache-dir.
	InterfaceCache []reportCacheEntry `json:"interfaceCache"`
}

type reportVMI struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
}

type reportInterface struct {
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
	Routes           []reportRoute `json:"routes"`
	DNS              reportDNS     `json:"dns"`
	MTU              int           `json:"mtu,omitempty"`
	HostPCIAddress   string        `json:"hostPCIAddress,omitempty"`
	DeviceType       string        `json:"deviceType,omitempty"`
	GuestPCIAddress  string        `json:"guestPCIAddress,omitempty"`
	BootOrder        uint          `json:"bootOrder,omitempty"`
	HostdevAlias     string        `json:"hostdevAlias"`
}

type reportRoute struct {
	Destination string `json:"destination"`
	NextHop     string `json:"nextHop"`
}

type reportDNS struct {
	Nameservers []string `json:"nameservers"`
	Search      []string `json:"search"`
	Domain      string   `json:"domain,omitempty"`
}

type reportMissing struct {
	Hook      string `json:"hook"`
	Interface string `json:"interface,omitempty"`
	Network   string `json:"network,omitempty"`
	Source    string `json:"source"`
	Field     string `json:"field,omitempty"`
	Text      string `json:"text"`
}

type reportFailure struct {
	Hook    string `json:"hook"`
	Message string `json:"message"`
}

type reportCloudInit struct {
	DataSource  string `json:"dataSource"` // noCloud | configDrive
	VolumeName  string `json:"volumeName,omitempty"`
	NetworkData string `json:"networkData"`
}

type reportCacheEntry struct {
	Path string          `json:"path"` // <vmi-uid>/<interface>, under --iface-cache-dir
	Data json.RawMessage `json:"data"`
}

// usageError is bad usage or unreadable input: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// runRender is the operator's debugging tool: given a pod (kubectl get pod -o json) or a pod-info
// directory and a VMI, print what the sidecar would generate.
func runRender(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	podFile := fs.String("pod", "", "virt-launcher Pod object as JSON or YAML (kubectl get pod NAME -o json)")
	podInfoDir := fs.String("pod-info-dir", "", "pod-info DownwardAPI directory (files labels, annotations), instead of --pod")
	deviceInfo := fs.String("device-info-file", "", "device-info DownwardAPI file, with --pod-info-dir (optional)")
	vmiFile := fs.String("vmi", "", "VirtualMachineInstance object as JSON or YAML (kubectl get vmi NAME -o json)")
	bindingName := fs.String("binding-name", "sriov-udn", "binding plugin name in the KubeVirt CR")
	podIP := fs.String("pod-ip", "", "pod IP deciding the primary address family (default: env MY_POD_IP, else the pod's annotations)")
	format := fs.String("format", "text", "output format: text or json")
	sample := fs.Bool("sample", false, "use the built-in sample pod and VMI")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, renderUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return exitRendered
		}
		fmt.Fprintf(stderr, "render: %v\nRun 'sriov-udn-binding render --help' for usage.\n", err)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q: render takes flags only (see render --help)", fs.Arg(0)))
	}
	if *format != "text" && *format != "json" {
		return fail(fmt.Errorf("invalid --format %q: want text or json", *format))
	}
	ipSource := "--pod-ip"
	if !flagSet(fs, "pod-ip") {
		*podIP, ipSource = os.Getenv("MY_POD_IP"), "env MY_POD_IP"
	}
	if *podIP != "" {
		if _, err := netval.ParseAddr(strings.TrimSpace(*podIP)); err != nil {
			return fail(fmt.Errorf("invalid %s %q: want an IP address such as 10.128.0.5 or fd00::5", ipSource, *podIP))
		}
	}

	snap, vmi, err := renderInputs(*sample, *podFile, *podInfoDir, *deviceInfo, *vmiFile)
	if err != nil {
		return fail(err)
	}
	r := render(vmi, snap, model.Options{BindingName: *bindingName, PodIP: *podIP})
	if r.Failure != nil {
		fmt.Fprintf(stderr, "render: the %s hook would fail: %s\n", r.Failure.Hook, r.Failure.Message)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "render: encoding the report: %v\n", err)
			return exitHookFail
		}
	} else {
		printReport(stdout, r)
	}
	return r.ExitCode
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// renderFlags are the flags only render knows; the top level names them in a hint.
var renderFlags = []string{"pod", "vmi", "sample", "format", "pod-ip"}

// renderHint says "did you mean render" when top-level arguments hold a flag only render has.
func renderHint(args []string) string {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		for _, f := range renderFlags {
			if name == f {
				return fmt.Sprintf("--%s is a flag of the render subcommand: sriov-udn-binding render %s", f, strings.Join(args, " "))
			}
		}
	}
	return ""
}

func renderInputs(sample bool, podFile, podInfoDir, deviceInfo, vmiFile string) (*downwardapi.Snapshot, *model.VirtualMachineInstance, error) {
	var podRaw, vmiRaw []byte
	var err error
	podFlag, vmiFlag := "--pod "+podFile, "--vmi "+vmiFile
	switch {
	case sample && (podFile != "" || vmiFile != "" || podInfoDir != "" || deviceInfo != ""):
		return nil, nil, usagef("--sample uses the built-in pod and VMI: give it without --pod, --pod-info-dir, --device-info-file or --vmi")
	case sample:
		podFlag, vmiFlag = "built-in sample pod", "built-in sample VMI"
		if podRaw, err = samples.ReadFile("samples/pod.json"); err != nil {
			return nil, nil, err
		}
		if vmiRaw, err = samples.ReadFile("samples/vmi.json"); err != nil {
			return nil, nil, err
		}
	case vmiFile == "":
		return nil, nil, usagef("--vmi FILE is required (a VirtualMachineInstance as JSON or YAML: kubectl get vmi NAME -o json), or --sample")
	case podFile == "" && podInfoDir == "" && deviceInfo == "":
		return nil, nil, usagef("--pod FILE is required (the virt-launcher Pod as JSON or YAML: kubectl get pod NAME -o json), or --pod-info-dir DIR")
	case podFile != "" && (podInfoDir != "" || deviceInfo != ""):
		return nil, nil, usagef("give either --pod or --pod-info-dir/--device-info-file, not both")
	default:
		if vmiRaw, err = readInput("--vmi", vmiFile, "a VirtualMachineInstance object"); err != nil {
			return nil, nil, err
		}
		if podFile != "" {
			if podRaw, err = readInput("--pod", podFile, "a Pod object"); err != nil {
				return nil, nil, err
			}
		}
	}
	vmi, err := decodeVMI(vmiRaw)
	if err != nil {
		return nil, nil, usagef("%s: %v", vmiFlag, err)
	}
	if podRaw != nil {
		snap, err := snapshotFromPod(podRaw)
		if err != nil {
			return nil, nil, usagef("%s: %v", podFlag, err)
		}
		return snap, vmi, nil
	}
	if err := checkPath("--pod-info-dir", podInfoDir, true); err != nil {
		return nil, nil, err
	}
	if err := checkPath("--device-info-file", deviceInfo, false); err != nil {
		return nil, nil, err
	}
	// A directory read through the watcher, which reads once synchronously.
	w, err := downwardapi.NewWatcher(downwardapi.Config{DeviceInfoFile: deviceInfo, PodInfoDir: podInfoDir})
	if err != nil {
		return nil, nil, usagef("--pod-info-dir %s: %v", podInfoDir, err)
	}
	defer w.Close()
	return w.Snapshot(), vmi, nil
}

// checkPath checks that a path given on the command line exists and is a directory or a file.
func checkPath(flagName, path string, wantDir bool) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return usagef("%s %s: %v", flagName, path, unwrapPathError(err))
	case wantDir && !st.IsDir():
		return usagef("%s %s: not a directory: want the DownwardAPI volume's directory (files labels, annotations)", flagName, path)
	case !wantDir && st.IsDir():
		return usagef("%s %s: is a directory: want the device-info file", flagName, path)
	}
	return nil
}

// unwrapPathError drops the *PathError wrapper: the caller names the path already.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func readInput(flagName, path, want string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, usagef("%s %s: %v", flagName, path, unwrapPathError(err))
	}
	if st.IsDir() {
		return nil, usagef("%s %s: is a directory: want a file holding %s as JSON or YAML", flagName, path, want)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("%s %s: %v", flagName, path, unwrapPathError(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInputSize+1))
	if err != nil {
		return nil, usagef("%s %s: %v", flagName, path, unwrapPathError(err))
	}
	if len(data) > maxInputSize {
		return nil, usagef("%s %s: larger than %d bytes: want %s", flagName, path, maxInputSize, want)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, usagef("%s %s: the file is empty: want %s as JSON or YAML", flagName, path, want)
	}
	return data, nil
}

// objectJSON converts one YAML (or JSON) document to JSON and checks that it is an object of the kind
// wanted (or of no kind, as a bare object), with the field every such object has. kindHint is how to
// get one object of that kind.
func objectJSON(raw []byte, kind, required, howToGet string) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		what := "empty"
		switch doc.(type) {
		case nil:
		case []any:
			what = "a list, not an object"
		default:
			what = "a scalar, not an object"
		}
		return nil, fmt.Errorf("%s: want a %s object (%s)", what, kind, howToGet)
	}
	got, _ := obj["kind"].(string)
	if items, ok := obj["items"].([]any); ok || strings.HasSuffix(got, "List") {
		return nil, fmt.Errorf("a %s of %d items: want one %s object; take one with %s, or jq '.items[0]'", orDefault(got, "List"), len(items), kind, howToGet)
	}
	switch {
	case got == "VirtualMachine" && kind == "VirtualMachineInstance":
		return nil, fmt.Errorf("a VirtualMachine: want its VirtualMachineInstance (%s)", howToGet)
	case got != "" && got != kind:
		return nil, fmt.Errorf("kind is %q, want %s (%s)", got, kind, howToGet)
	}
	if _, ok := obj[required].(map[string]any); !ok {
		return nil, fmt.Errorf("no %s object: want a %s object (%s)", required, kind, howToGet)
	}
	return json.Marshal(obj)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func decodeVMI(raw []byte) (*model.VirtualMachineInstance, error) {
	js, err := objectJSON(raw, "VirtualMachineInstance", "spec", "kubectl get vmi NAME -o json")
	if err != nil {
		return nil, err
	}
	vmi, err := model.DecodeVMI(js)
	if err != nil {
		return nil, plainDecodeError(err)
	}
	return vmi, nil
}

// plainDecodeError says which field has the wrong JSON type instead of naming Go types.
func plainDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s: a JSON %s is not valid there", te.Field, te.Value)
	}
	return err
}

func snapshotFromPod(raw []byte) (*downwardapi.Snapshot, error) {
	js, err := objectJSON(raw, "Pod", "metadata", "kubectl get pod NAME -o json")
	if err != nil {
		return nil, err
	}
	var pod struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &pod); err != nil {
		return nil, plainDecodeError(err)
	}
	return downwardapi.SnapshotFromMaps(pod.Metadata.Labels, pod.Metadata.Annotations), nil
}

// render runs, without waiting, what virt-launcher would have the hooks do, in its order
// (PreCloudInitIso, then OnDefineDomain), through the same pipeline functions the hooks call.
func render(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options) *renderReport {
	r := &renderReport{
		VMI:             reportVMI{Name: vmi.Name, Namespace: vmi.Namespace, UID: vmi.UID},
		BindingName:     opts.BindingName,
		BoundInterfaces: append([]string{}, model.BoundInterfaceNames(vmi, opts.BindingName)...),
		Interfaces:      []reportInterface{},
		Warnings:        []pipeline.Warning{},
		Missing:         []reportMissing{},
		InterfaceCache:  []reportCacheEntry{},
	}
	defer func() {
		r.Warnings = pipeline.SortWarnings(r.Warnings)
		switch {
		case r.Failure != nil:
			r.Result, r.ExitCode = "wouldFail", exitHookFail
		case len(r.Missing) > 0:
			r.Result, r.ExitCode = "waiting", exitWaiting
		default:
			r.Result, r.ExitCode = "rendered", exitRendered
		}
	}()
	if ifaces, err := model.Build(vmi, snap, opts); err == nil {
		for _, i := range ifaces {
			r.Interfaces = append(r.Interfaces, viewInterface(i))
		}
	}
	failed := func(err error) *renderReport {
		hook, msg := "", err.Error()
		var pe *pipeline.Error
		if errors.As(err, &pe) {
			hook = pe.Hook
		}
		r.Failure = &reportFailure{Hook: hook, Message: msg}
		return r
	}

	ciData, dataSource, notes, hasVolume, err := pipeline.VolumeCloudInitData(vmi)
	if err != nil {
		return failed(&pipeline.Error{Hook: pipeline.PreCloudInitIso, Kind: pipeline.InvalidInput, Err: err})
	}
	r.Warnings = append(r.Warnings, notes...)
	domainDoc, err := pipeline.ParseDomain(context.Background(), vmi, opts, []byte(renderDomainXML))
	if err != nil {
		return failed(err)
	}
	domainNeed, err := pipeline.DomainNeed(vmi, opts, domainDoc)
	if err != nil {
		return failed(err)
	}
	if hasVolume {
		r.Missing = appendMissing(r.Missing, pipeline.PreCloudInitIso, pipeline.CloudInitNeed(vmi, opts)(snap))
	}
	r.Missing = appendMissing(r.Missing, pipeline.OnDefineDomain, domainNeed(snap))
	if len(r.Missing) > 0 {
		return r
	}

	if hasVolume {
		data, _, warnings, err := pipeline.CloudInit(vmi, snap, opts, ciData, nil)
		if err != nil {
			return failed(err)
		}
		r.Warnings = append(r.Warnings, warnings...)
		_, network, err := cloudinit.NetworkData(data)
		if err != nil {
			return failed(err)
		}
		v, _ := volumeName(ciData)
		r.CloudInit = &reportCloudInit{DataSource: dataSource, VolumeName: v, NetworkData: string(network)}
	}
	dom, warnings, err := pipeline.Domain(vmi, snap, opts, []byte(renderDomainXML), domainDoc)
	if err != nil {
		r.CloudInit = nil // virt-launcher would not start the VM: show the failure, not half the result
		return failed(err)
	}
	r.Warnings = append(r.Warnings, warnings...)
	if len(model.BoundInterfaceNames(vmi, opts.BindingName)) == 0 {
		return r // nothing bound: the domain and the cloud-init data pass through, no cache is written
	}
	r.DomainXML = string(dom)

	// The cache refresher never fails a hook (pkg/hooks RefreshCache): a problem here is a warning.
	cache, err := pipeline.CacheFor(vmi, snap, opts)
	if err == nil {
		entries, entriesErr := cache.Entries()
		err = entriesErr
		for _, e := range entries {
			raw, err := e.Encode()
			if err != nil {
				continue
			}
			r.InterfaceCache = append(r.InterfaceCache, reportCacheEntry{Path: vmi.UID + "/" + e.Name, Data: json.RawMessage(bytes.TrimSpace(raw))})
		}
	}
	if err != nil {
		r.Warnings = append(r.Warnings, pipeline.Warning{Code: warnInterfaceCache, Message: "the interface cache would not be (fully) written: " + err.Error()})
	}
	return r
}

func volumeName(cloudInitData []byte) (string, error) {
	var d struct{ VolumeName string }
	err := json.Unmarshal(cloudInitData, &d)
	return d.VolumeName, err
}

func appendMissing(out []reportMissing, hook string, items []downwardapi.Missing) []reportMissing {
	for _, m := range items {
		out = append(out, reportMissing{Hook: hook, Interface: m.Interface, Network: m.Network, Source: m.Source, Field: m.Field, Text: m.String()})
	}
	return out
}

func viewInterface(i model.BoundInterface) reportInterface {
	v := reportInterface{
		Name: i.Name, Network: i.Network, NetworkName: i.NetworkName, PodInterfaceName: i.PodInterfaceName,
		MACSource: string(i.MACSource), Role: i.Role, PrefixKnown: i.PrefixKnown, MTU: i.MTU,
		HostPCIAddress: i.HostPCIAddress, DeviceType: i.DeviceType, GuestPCIAddress: i.GuestPCIAddress,
		HostdevAlias: domain.HostdevAlias(i.Name),
		Addresses:    strs(i.Addresses), Gateways: strs(i.Gateways), Routes: []reportRoute{},
		DNS: reportDNS{Nameservers: strs(i.DNS.Nameservers), Search: append([]string{}, i.DNS.Search...), Domain: i.DNS.Domain},
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
		v.Routes = append(v.Routes, reportRoute{Destination: rt.Dest.String(), NextHop: rt.NextHop.String()})
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

func printReport(w io.Writer, r *renderReport) {
	name := r.VMI.Name
	if r.VMI.Namespace != "" {
		name = r.VMI.Namespace + "/" + name
	}
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(w, "VMI %s: %d interface(s) bound to %q\n", name, len(r.BoundInterfaces), r.BindingName)
	for _, i := range r.Interfaces {
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
		vf := "host " + orDefault(i.HostPCIAddress, "PCI address not known yet")
		if i.DeviceType != "" {
			vf += " (" + i.DeviceType + ")"
		}
		if i.GuestPCIAddress != "" {
			vf += " -> guest " + i.GuestPCIAddress
		}
		fmt.Fprintf(w, "   %-10s %s, alias %s\n", "VF", vf, i.HostdevAlias)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w, "\n== warnings")
		for _, x := range r.Warnings {
			if x.Interface != "" {
				fmt.Fprintf(w, "   [%s] interface %s: %s\n", x.Code, x.Interface, x.Message)
			} else {
				fmt.Fprintf(w, "   [%s] %s\n", x.Code, x.Message)
			}
		}
	}
	if len(r.Missing) > 0 {
		fmt.Fprintln(w, "\n== still missing: the hooks would wait for these, then fail (exit code 3)")
		for _, m := range r.Missing {
			fmt.Fprintf(w, "   %s: %s\n", m.Hook, m.Text)
		}
	}
	if r.Failure != nil {
		fmt.Fprintf(w, "\n== the %s hook would fail (exit code 1)\n   %s\n", r.Failure.Hook, r.Failure.Message)
		return
	}
	if r.DomainXML != "" {
		section(w, "libvirt domain devices (OnDefineDomain)", r.DomainXML)
	}
	if c := r.CloudInit; c != nil && len(r.Interfaces) > 0 {
		body := c.NetworkData
		var pretty bytes.Buffer
		if c.DataSource == "configDrive" && json.Indent(&pretty, []byte(body), "", "  ") == nil {
			body = pretty.String()
		}
		title := map[string]string{"noCloud": "NoCloud network-config", "configDrive": "ConfigDrive network_data.json"}[c.DataSource]
		section(w, fmt.Sprintf("%s (PreCloudInitIso, volume %s, merged with the VMI's networkData)", title, c.VolumeName), body)
	}
	if len(r.InterfaceCache) > 0 {
		var cache strings.Builder
		for _, e := range r.InterfaceCache {
			var compact bytes.Buffer
			if json.Compact(&compact, e.Data) != nil {
				compact.Write(e.Data)
			}
			fmt.Fprintf(&cache, "<iface-cache-dir>/%s: %s\n", e.Path, compact.Bytes())
		}
		section(w, "PodIfaceCacheData (KubeVirt's format, read by pkg/network/cache)", cache.String())
	}
}

func section(w io.Writer, title, body string) {
	fmt.Fprintf(w, "\n== %s\n%s", title, body)
	if !strings.HasSuffix(body, "\n") {
		fmt.Fprintln(w)
	}
}
