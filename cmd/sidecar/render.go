package main

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/binding"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// The built-in pod and VMI `render --sample` (make demo) uses: a dual-stack layer2 secondary UDN over
// an SR-IOV VF, and a localnet network whose IPAM is DHCP.
var (
	//go:embed samples/pod.json
	samplePod []byte
	//go:embed samples/vmi.json
	sampleVMI []byte
)

// maxInputSize bounds the pod and VMI files render reads.
const maxInputSize = 8 << 20

// render's exit codes (docs/troubleshooting.md "Exit codes", `render --help`).
const (
	exitRendered = 0 // everything rendered; warnings may have been printed
	exitHookFail = 1 // a hook would fail: the message is the hook's
	exitUsage    = 2 // bad flags or unreadable input
	exitWaiting  = 3 // data is missing: the hooks would wait for it (listed), then fail
)

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
	if !visited(fs)["pod-ip"] {
		*podIP, ipSource = os.Getenv("MY_POD_IP"), "env MY_POD_IP"
	}
	if *podIP != "" && !pipeline.ValidPodIP(*podIP) {
		return fail(fmt.Errorf("invalid %s %q: want an IP address such as 10.128.0.5 or fd00::5", ipSource, *podIP))
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

// renderFlags are the flags only render knows; the top level names them in a hint.
var renderFlags = []string{"pod", "vmi", "sample", "format", "pod-ip"}

// renderHint says "did you mean render" when top-level arguments hold a flag only render has.
func renderHint(args []string) string {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && slices.Contains(renderFlags, name) {
			return fmt.Sprintf("--%s is a flag of the render subcommand: sriov-udn-binding render %s", name, strings.Join(args, " "))
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
		return nil, nil, errors.New("--sample uses the built-in pod and VMI: give it without --pod, --pod-info-dir, --device-info-file or --vmi")
	case sample:
		podFlag, vmiFlag = "built-in sample pod", "built-in sample VMI"
		podRaw, vmiRaw = samplePod, sampleVMI
	case vmiFile == "":
		return nil, nil, errors.New("--vmi FILE is required (a VirtualMachineInstance as JSON or YAML: kubectl get vmi NAME -o json), or --sample")
	case podFile == "" && podInfoDir == "" && deviceInfo == "":
		return nil, nil, errors.New("--pod FILE is required (the virt-launcher Pod as JSON or YAML: kubectl get pod NAME -o json), or --pod-info-dir DIR")
	case podFile != "" && (podInfoDir != "" || deviceInfo != ""):
		return nil, nil, errors.New("give either --pod or --pod-info-dir/--device-info-file, not both")
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
		return nil, nil, fmt.Errorf("%s: %w", vmiFlag, err)
	}
	if podRaw != nil {
		snap, err := snapshotFromPod(podRaw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", podFlag, err)
		}
		return snap, vmi, nil
	}
	if err := checkPath("--pod-info-dir", podInfoDir, true); err != nil {
		return nil, nil, err
	}
	if err := checkPath("--device-info-file", deviceInfo, false); err != nil {
		return nil, nil, err
	}
	snap, err := binding.ReadOnce(binding.Sources{DeviceInfoFile: deviceInfo, PodInfoDir: podInfoDir})
	if err != nil {
		return nil, nil, fmt.Errorf("--pod-info-dir %s: %w", podInfoDir, err)
	}
	return snap, vmi, nil
}

// checkPath checks that a path given on the command line exists and is a directory or a file.
func checkPath(flagName, path string, wantDir bool) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: %w", flagName, path, unwrapPathError(err))
	case wantDir && !st.IsDir():
		return fmt.Errorf("%s %s: not a directory: want the DownwardAPI volume's directory (files labels, annotations)", flagName, path)
	case !wantDir && st.IsDir():
		return fmt.Errorf("%s %s: is a directory: want the device-info file", flagName, path)
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
		return nil, fmt.Errorf("%s %s: %w", flagName, path, unwrapPathError(err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s %s: is a directory: want a file holding %s as JSON or YAML", flagName, path, want)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flagName, path, unwrapPathError(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInputSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flagName, path, unwrapPathError(err))
	}
	if len(data) > maxInputSize {
		return nil, fmt.Errorf("%s %s: larger than %d bytes: want %s", flagName, path, maxInputSize, want)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s %s: the file is empty: want %s as JSON or YAML", flagName, path, want)
	}
	return data, nil
}

// objectJSON converts one YAML (or JSON) document to JSON and checks that it is an object of the kind
// wanted (or of no kind, as a bare object), with the field every such object has. kindHint is how to
// get one object of that kind.
func objectJSON(raw []byte, kind, required, howToGet string) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %w", err)
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
		return nil, fmt.Errorf("a %s of %d items: want one %s object; take one with %s, or jq '.items[0]'", cmp.Or(got, "List"), len(items), kind, howToGet)
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

// render is what the hooks would do for vmi and snap, with render's exit code.
func render(vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, opts model.Options) *pipeline.Report {
	r := pipeline.NewCall(vmi, opts).Report(snap)
	r.ExitCode = map[string]int{pipeline.ResultWouldFail: exitHookFail, pipeline.ResultWaiting: exitWaiting}[r.Result]
	return r
}
