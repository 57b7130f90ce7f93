package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/ifacecache"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// samples are the built-in pod and VMI `render --sample` (make demo) uses: a dual-stack layer2
// secondary UDN over an SR-IOV VF, and a localnet network whose IPAM is DHCP.
//
//go:embed samples/pod.json samples/vmi.json
var samples embed.FS

// maxInputSize bounds the pod and VMI files render reads.
const maxInputSize = 8 << 20

// rendered is what the sidecar would produce for one VMI in one pod.
type rendered struct {
	VMI            string                     `json:"vmi"`
	Binding        string                     `json:"binding"`
	Interfaces     []renderedInterface        `json:"interfaces"`
	Missing        []string                   `json:"missing,omitempty"`
	DomainDevices  string                     `json:"domainDevices"`
	NoCloudNetwork string                     `json:"noCloudNetworkConfig"`
	ConfigDriveNet string                     `json:"configDriveNetworkData"`
	InterfaceCache map[string]json.RawMessage `json:"interfaceCache"`
	// FallbackNIC is the pod-network NIC added with DHCP because the VMI gives no networkData.
	FallbackNIC string `json:"fallbackNIC,omitempty"`
}

// renderedInterface shows a BoundInterface with its MAC as text (net.HardwareAddr would marshal as base64).
type renderedInterface struct {
	model.BoundInterface
	MAC string `json:"MAC,omitempty"`
}

// runRender is the operator's debugging tool: given a pod (kubectl get pod -o json) or a pod-info
// directory and a VMI, print what the sidecar would generate.
func runRender(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	podFile := fs.String("pod", "", "virt-launcher pod as JSON or YAML (kubectl get pod -o json)")
	podInfoDir := fs.String("pod-info-dir", "", "pod-info DownwardAPI directory (labels, annotations), instead of --pod")
	deviceInfo := fs.String("device-info-file", "", "device-info DownwardAPI file (optional)")
	vmiFile := fs.String("vmi", "", "VMI as JSON or YAML (kubectl get vmi -o json)")
	bindingName := fs.String("binding-name", "sriov-udn", "binding plugin name")
	podIP := fs.String("pod-ip", os.Getenv("MY_POD_IP"), "pod IP deciding the primary family (env MY_POD_IP)")
	format := fs.String("format", "text", "output format: text or json")
	sample := fs.Bool("sample", false, "use the built-in sample pod and VMI")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "render: invalid --format %q: want text or json\n", *format)
		return 2
	}

	snap, vmi, err := renderInputs(*sample, *podFile, *podInfoDir, *deviceInfo, *vmiFile)
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return 2
	}
	out, err := render(vmi, snap, model.Options{BindingName: *bindingName, PodIP: *podIP})
	if err != nil {
		fmt.Fprintf(stderr, "render: %v\n", err)
		return 1
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "render: %v\n", err)
			return 1
		}
		return 0
	}
	printRendered(stdout, out)
	return 0
}

func renderInputs(sample bool, podFile, podInfoDir, deviceInfo, vmiFile string) (*downwardapi.Snapshot, *model.VirtualMachineInstance, error) {
	var podRaw, vmiRaw []byte
	var err error
	switch {
	case sample:
		if podRaw, err = samples.ReadFile("samples/pod.json"); err != nil {
			return nil, nil, err
		}
		if vmiRaw, err = samples.ReadFile("samples/vmi.json"); err != nil {
			return nil, nil, err
		}
	case vmiFile == "":
		return nil, nil, errors.New("--vmi is required (or --sample)")
	case (podFile == "") == (podInfoDir == "" && deviceInfo == ""):
		return nil, nil, errors.New("give exactly one of --pod or --pod-info-dir/--device-info-file")
	default:
		if vmiRaw, err = readInput(vmiFile); err != nil {
			return nil, nil, err
		}
		if podFile != "" {
			if podRaw, err = readInput(podFile); err != nil {
				return nil, nil, err
			}
		}
	}
	vmi, err := decodeVMI(vmiRaw)
	if err != nil {
		return nil, nil, fmt.Errorf("VMI %s: %w", orSample(vmiFile), err)
	}
	if podRaw != nil {
		snap, err := snapshotFromPod(podRaw)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s: %w", orSample(podFile), err)
		}
		return snap, vmi, nil
	}
	// A directory read through the watcher, which reads once synchronously.
	w, err := downwardapi.NewWatcher(downwardapi.Config{DeviceInfoFile: deviceInfo, PodInfoDir: podInfoDir})
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	return w.Snapshot(), vmi, nil
}

func orSample(name string) string {
	if name == "" {
		return "(built-in sample)"
	}
	return name
}

func readInput(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInputSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxInputSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxInputSize)
	}
	return data, nil
}

func decodeVMI(raw []byte) (*model.VirtualMachineInstance, error) {
	js, err := yamlToJSON(raw) // JSON is YAML: both forms are accepted
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	vmi, err := model.DecodeVMI(js)
	if err != nil {
		return nil, err
	}
	if vmi.Kind != "" && vmi.Kind != "VirtualMachineInstance" {
		return nil, fmt.Errorf("kind is %q, want VirtualMachineInstance", vmi.Kind)
	}
	return vmi, nil
}

// yamlToJSON converts a YAML (or JSON) document to JSON. Only string-keyed maps are accepted, as
// in Kubernetes objects.
func yamlToJSON(raw []byte) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

func snapshotFromPod(raw []byte) (*downwardapi.Snapshot, error) {
	js, err := yamlToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var pod struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &pod); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("kind is %q, want Pod", pod.Kind)
	}
	return downwardapi.SnapshotFromMaps(pod.Metadata.Labels, pod.Metadata.Annotations), nil
}

// render runs the same pure steps the hooks run, without waiting: what is missing is listed.
func render(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options) (*rendered, error) {
	out := &rendered{VMI: vmi.Namespace + "/" + vmi.Name, Binding: opts.BindingName, InterfaceCache: map[string]json.RawMessage{}}
	for _, m := range model.MissingForCloudInit(vmi, snap, opts) {
		out.Missing = append(out.Missing, "cloud-init: "+m.String())
	}
	for _, m := range model.MissingForDomain(vmi, snap, opts, nil) {
		out.Missing = append(out.Missing, "domain: "+m.String())
	}
	ifaces, err := model.Build(vmi, snap, opts)
	if err != nil {
		return nil, err
	}
	for _, i := range ifaces {
		view := renderedInterface{BoundInterface: i}
		if i.MAC != nil {
			view.MAC = i.MAC.String()
		}
		out.Interfaces = append(out.Interfaces, view)
	}
	if len(ifaces) == 0 {
		return out, nil
	}
	if len(out.Missing) > 0 {
		return out, nil // rendering half-known interfaces would only show errors
	}

	dom, err := domain.Apply([]byte("<domain type=\"kvm\">\n  <devices>\n  </devices>\n</domain>\n"), ifaces)
	if err != nil {
		return nil, err
	}
	out.DomainDevices = string(dom)

	userNoCloud, userConfigDrive := userNetworkData(vmi)
	var fallback []model.BoundInterface
	if fb, err := model.FallbackInterface(vmi, snap, opts.BindingName); err != nil {
		return nil, err
	} else if fb != nil {
		fallback = append(fallback, *fb)
	}
	ncIfaces, err := cloudinit.WithFallback(ifaces, userNoCloud, fallback...)
	if err != nil {
		return nil, err
	}
	if len(ncIfaces) > len(ifaces) {
		out.FallbackNIC = fallback[0].Name + " (" + fallback[0].MAC.String() + ")"
	}
	nc, err := cloudinit.MergeNoCloud([]byte(userNoCloud), ncIfaces)
	if err != nil {
		return nil, err
	}
	out.NoCloudNetwork = string(nc)
	cdIfaces, err := cloudinit.WithFallback(ifaces, userConfigDrive, fallback...)
	if err != nil {
		return nil, err
	}
	cd, err := cloudinit.MergeNetworkDataJSON([]byte(userConfigDrive), cdIfaces)
	if err != nil {
		return nil, err
	}
	out.ConfigDriveNet = string(cd)

	entries, err := ifacecache.BuildEntries(vmi.Spec.Domain.Devices.Interfaces, ifaces, model.PrimaryFamily(snap, opts.PodIP))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		raw, err := json.Marshal(e.Data)
		if err != nil {
			return nil, err
		}
		out.InterfaceCache[vmi.UID+"/"+e.Name] = raw
	}
	return out, nil
}

// userNetworkData returns the networkData the VMI's cloud-init volumes carry inline.
func userNetworkData(vmi *model.VirtualMachineInstance) (noCloud, configDrive string) {
	for _, v := range vmi.Spec.Volumes {
		if s := v.CloudInitNoCloud; s != nil {
			noCloud = s.NetworkData
		}
		if s := v.CloudInitConfigDrive; s != nil {
			configDrive = s.NetworkData
		}
	}
	return noCloud, configDrive
}

func printRendered(w io.Writer, r *rendered) {
	fmt.Fprintf(w, "VMI %s: %d interface(s) bound to %q\n", r.VMI, len(r.Interfaces), r.Binding)
	for _, i := range r.Interfaces {
		fmt.Fprintf(w, "\n== interface %s (network %s -> %s, pod interface %s)\n", i.Name, i.Network, i.NetworkName, i.PodInterfaceName)
		fmt.Fprintf(w, "   MAC        %s (from %s)\n", i.MAC, i.MACSource)
		mode := "static"
		if i.DHCP {
			mode = "DHCP (pod-networks ipam_mode)"
		}
		fmt.Fprintf(w, "   mode       %s, role %s\n", mode, dash(i.Role))
		fmt.Fprintf(w, "   addresses  %s%s\n", dash(join(i.Addresses)), map[bool]string{true: "", false: " (prefix guessed: network-status has none)"}[i.PrefixKnown || len(i.Addresses) == 0])
		fmt.Fprintf(w, "   gateways   %s\n", dash(join(i.Gateways)))
		routes := make([]string, 0, len(i.Routes))
		for _, rt := range i.Routes {
			routes = append(routes, rt.Dest.String()+" via "+rt.NextHop.String())
		}
		fmt.Fprintf(w, "   routes     %s\n", dash(strings.Join(routes, ", ")))
		fmt.Fprintf(w, "   DNS        %s search %s\n", dash(join(i.DNS.Nameservers)), dash(strings.Join(i.DNS.Search, " ")))
		fmt.Fprintf(w, "   MTU        %s\n", dash(map[bool]string{true: fmt.Sprint(i.MTU), false: ""}[i.MTU > 0]))
		fmt.Fprintf(w, "   VF         host %s (%s) -> guest %s, alias %s\n", dash(i.HostPCIAddress), dash(i.DeviceType), dash(i.GuestPCIAddress), domain.HostdevAlias(i.Name))
	}
	if len(r.Missing) > 0 {
		fmt.Fprintln(w, "\n== still missing (the hooks would wait for these)")
		for _, m := range r.Missing {
			fmt.Fprintf(w, "   %s\n", m)
		}
		return
	}
	if len(r.Interfaces) == 0 {
		return
	}
	if r.FallbackNIC != "" {
		fmt.Fprintf(w, "\n== pod-network NIC %s: DHCPv4 in the generated config, since it replaces cloud-init's DHCP fallback\n", r.FallbackNIC)
	}
	section(w, "libvirt domain devices (OnDefineDomain)", r.DomainDevices)
	section(w, "NoCloud network-config (PreCloudInitIso, merged with the VMI's networkData)", r.NoCloudNetwork)
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(r.ConfigDriveNet), "", "  ") == nil {
		section(w, "ConfigDrive network_data.json (PreCloudInitIso)", pretty.String())
	} else {
		section(w, "ConfigDrive network_data.json (PreCloudInitIso)", r.ConfigDriveNet)
	}
	var cache strings.Builder
	for _, name := range slices.Sorted(maps.Keys(r.InterfaceCache)) {
		fmt.Fprintf(&cache, "<iface-cache-dir>/%s: %s\n", name, r.InterfaceCache[name])
	}
	section(w, "PodIfaceCacheData (KubeVirt's format, read by pkg/network/cache)", cache.String())
}

func section(w io.Writer, title, body string) {
	fmt.Fprintf(w, "\n== %s\n%s", title, body)
	if !strings.HasSuffix(body, "\n") {
		fmt.Fprintln(w)
	}
}

func join[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
