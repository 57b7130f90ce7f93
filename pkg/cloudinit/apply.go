package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Field names of KubeVirt's cloudinit.CloudInitData (pkg/cloud-init/cloud-init.go).
const (
	fieldDataSource  = "DataSource"
	fieldUserData    = "UserData"
	fieldNetworkData = "NetworkData"
)

// DataSource values of KubeVirt's cloudinit.DataSourceType.
const (
	dataSourceNoCloud     = "noCloud"
	dataSourceConfigDrive = "configDrive"
)

// minimalUserData is what KubeVirt's own example hook returns: IsValidCloudInitData (cloud-init.go)
// rejects an empty UserData, and the hook manager then ignores the answer's CloudInitData and reads the
// legacy CloudInitNoCloudSource, which the sidecar does not send (hooks/manager.go
// preCloudInitIsoValidateResult): the call would fail.
const minimalUserData = "#cloud-config\n"

// Apply merges our config for ifaces into the CloudInitData JSON and returns the new CloudInitData JSON.
// With no ifaces the data passes through (PassThrough). podNIC is the NIC cloud-init's DHCP fallback
// would have configured (WithPodNIC). Apply is the steps of one PreCloudInitIso in one call, for callers
// that need only the result; pkg/pipeline runs the steps itself.
func Apply(cloudInitData []byte, ifaces []model.BoundInterface, podNIC ...model.BoundInterface) (newData []byte, err error) {
	return ApplyWith(cloudInitData, ApplyOptions{}, ifaces, podNIC...)
}

// ApplyOptions are what Apply does besides the network config.
type ApplyOptions struct {
	// WindowsNetworkScript adds, for a ConfigDrive datasource, the cloudbase-init script (windows.go);
	// the VMI opts in with WindowsNetworkScriptAnnotation.
	WindowsNetworkScript bool
	// Warn, when set, receives each case that works but is probably not meant (code: a Warn* constant).
	Warn func(code, message string)
}

// ApplyWith is Apply with options.
func ApplyWith(cloudInitData []byte, opts ApplyOptions, ifaces []model.BoundInterface, podNIC ...model.BoundInterface) (newData []byte, err error) {
	in, err := DecodeInput(cloudInitData)
	if err != nil {
		return nil, err
	}
	if len(ifaces) == 0 {
		return in.PassThrough()
	}
	if ifaces, err = WithPodNIC(ifaces, in.UserNetworkData(), podNIC...); err != nil {
		return nil, err
	}
	plans, err := in.Plan(ifaces)
	if err != nil {
		return nil, err
	}
	user, err := in.ParseNetworkData()
	if err != nil {
		return nil, err
	}
	res, err := in.Merge(opts, plans, user)
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}

// Input is one CloudInitData JSON object as virt-launcher sends it, decoded once per call.
type Input struct {
	raw    []byte
	fields map[string]field
	// The fields' keys as they came (canonical when absent) and their text (nil when absent or null).
	userKey, networkKey   string
	userData, networkData *string
	userNetwork           string // the user's NetworkData; Merge replaces networkData with ours
}

// field is one member of CloudInitData. A JSON string is decoded once, to its text, and no escaped copy
// is kept: the text of a 1 MiB Secret is a sixth of the up to 6 MiB of \u00XX escapes it arrives as.
// Anything else (the metadata, DevicesData, fields of newer KubeVirt versions) is kept as it came.
type field struct {
	text *string
	raw  json.RawMessage
}

func (f *field) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		f.text = new(string)
		return json.Unmarshal(data, f.text)
	}
	f.raw = append(json.RawMessage(nil), data...)
	return nil
}

// DecodeInput decodes a CloudInitData JSON object, once, and checks its UserData and NetworkData fields
// (a map keeps the fields of newer KubeVirt versions, which a struct of today's would drop).
func DecodeInput(cloudInitData []byte) (*Input, error) {
	in := &Input{raw: cloudInitData}
	if err := json.Unmarshal(cloudInitData, &in.fields); err != nil {
		return nil, fmt.Errorf("cloudInitData: not a JSON object: %w", err)
	}
	if in.fields == nil {
		return nil, fmt.Errorf("cloudInitData: is null (the VMI has no cloudInitNoCloud or cloudInitConfigDrive volume)")
	}
	var err error
	if in.userKey, in.userData, err = stringField(in.fields, fieldUserData); err != nil {
		return nil, err
	}
	if in.networkKey, in.networkData, err = stringField(in.fields, fieldNetworkData); err != nil {
		return nil, err
	}
	in.userNetwork = textOf(in.networkData)
	return in, nil
}

// UserNetworkData is the user's NetworkData text, "" when there is none.
func (in *Input) UserNetworkData() string { return in.userNetwork }

// setText replaces the text of the field key (kept in *dst too).
func (in *Input) setText(key string, dst **string, text string) {
	*dst = &text
	in.fields[key] = field{text: &text}
}

// PassThrough is the result when nothing is bound: the data as it came, an empty UserData made minimal.
func (in *Input) PassThrough() (newData []byte, err error) {
	changed := textOf(in.userData) == ""
	if changed {
		in.setText(in.userKey, &in.userData, minimalUserData)
	}
	return in.encode(changed)
}

// dataSource returns the DataSource and its format; an unknown one is an error.
func (in *Input) dataSource() (string, format, error) {
	_, text, err := stringField(in.fields, fieldDataSource)
	if err != nil {
		return "", format{}, err
	}
	dataSource := textOf(text)
	f, ok := formats[dataSource]
	if !ok {
		return "", format{}, fmt.Errorf("cloudInitData: DataSource %q is neither %q nor %q", dataSource, dataSourceNoCloud, dataSourceConfigDrive)
	}
	return dataSource, f, nil
}

// Plan plans ifaces (WithPodNIC's) for this CloudInitData's DataSource, once for every writer of the call.
func (in *Input) Plan(ifaces []model.BoundInterface) (*Plans, error) {
	dataSource, f, err := in.dataSource()
	if err != nil {
		return nil, err
	}
	plans, err := planNICs(ifaces)
	if err != nil {
		return nil, fmt.Errorf("cloudInitData (DataSource %s): %w", dataSource, err)
	}
	return &Plans{dataSource: dataSource, format: f, plans: plans}, nil
}

// ParseNetworkData parses the user's NetworkData in the format of the DataSource, once per call.
func (in *Input) ParseNetworkData() (*UserNetwork, error) {
	dataSource, f, err := in.dataSource()
	if err != nil {
		return nil, err
	}
	u, err := parseUser(f, []byte(in.UserNetworkData()))
	if err != nil {
		return nil, fmt.Errorf("cloudInitData (DataSource %s): %w", dataSource, err)
	}
	return u, nil
}

// Result is what Merge makes of one CloudInitData.
type Result struct {
	Data        []byte // the new CloudInitData JSON
	DataSource  string // KubeVirt's: "noCloud" or "configDrive"
	NetworkData []byte // the network config written into Data
	// UserConfigured names the interfaces whose NIC the user's networkData configures already: the
	// user's entry is kept and ours left out, which the caller reports.
	UserConfigured []string
}

// Merge writes our config for plans, merged with the user's networkData, into the CloudInitData, and
// composes the user data so that the config reaches the guest at every start (userdata.go). It runs
// once per Input: it changes the parsed user document.
func (in *Input) Merge(opts ApplyOptions, plans *Plans, user *UserNetwork) (*Result, error) {
	ours, theirs := user.split(plans.plans)
	merged, err := user.write(plans.format, ours)
	if err != nil {
		return nil, fmt.Errorf("cloudInitData (DataSource %s): %w", plans.dataSource, err)
	}
	in.setText(in.networkKey, &in.networkData, string(merged))
	var script string
	if opts.WindowsNetworkScript && plans.format.windowsScript {
		if script, err = windowsNetworkScript(ours); err != nil {
			return nil, fmt.Errorf("cloudInitData: Windows network script: %w", err)
		}
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(string, string) {}
	}
	userText := textOf(in.userData)
	note, err := checkUserDataEncoding(userText)
	if err != nil {
		return nil, fmt.Errorf("cloudInitData: field %s: %w", in.userKey, err)
	}
	if note != "" {
		warn(WarnUserDataReplacementChars, note)
	}
	if plans.dataSource == dataSourceConfigDrive && script == "" && userWritesDropIn(userText) {
		// Their entry wins; ours would be written after it and replace it (write_files runs in order).
		warn(WarnUserDropInWins, fmt.Sprintf("the user data's write_files writes %s, the drop-in that makes "+
			"cloud-init apply the config drive's network config at every boot: the user's entry is kept and ours left out",
			configDriveDropInPath))
	} else if composed := composeUserData(userText, plans.dataSource, script); composed != userText {
		in.setText(in.userKey, &in.userData, composed)
	}
	data, err := in.encode(true)
	if err != nil {
		return nil, err
	}
	return &Result{Data: data, DataSource: plans.dataSource, NetworkData: merged,
		UserConfigured: theirs}, nil
}

// encode writes the CloudInitData: the input as it came when nothing changed.
func (in *Input) encode(changed bool) ([]byte, error) {
	if !changed {
		return in.raw, nil
	}
	obj := make(map[string]any, len(in.fields))
	for k, f := range in.fields {
		obj[k] = f.raw
		if f.text != nil {
			obj[k] = *f.text
		}
	}
	newData, err := marshalJSON(obj, false)
	if err != nil {
		return nil, fmt.Errorf("cloudInitData: encoding: %w", err)
	}
	return bytes.TrimSuffix(newData, []byte("\n")), nil
}

// marshalJSON is json.Marshal without HTML escaping, indented or compact, ending in a newline: escaping
// '<', '>' and '&' again would grow an HTML user data sixfold, past the 4 MiB answer virt-launcher receives.
func marshalJSON(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WithPodNIC returns ifaces plus the pod-network NIC (model.FindPodNIC), first, when the user gave no
// networkData: our config then replaces cloud-init's DHCP fallback, so it must configure that NIC too.
// A pod NIC without a MAC cannot be matched: an error naming it, rather than a pod network left down.
func WithPodNIC(ifaces []model.BoundInterface, userNetworkData string, podNIC ...model.BoundInterface) ([]model.BoundInterface, error) {
	if len(podNIC) == 0 || len(ifaces) == 0 || strings.TrimSpace(userNetworkData) != "" {
		return ifaces, nil
	}
	for _, fb := range podNIC {
		if fb.MAC.IsZero() {
			return nil, fmt.Errorf("interface %q (pod network) has no macAddress: the VMI gives no networkData, so "+
				"cloud-init would configure that NIC by DHCP, but the network config written for the SR-IOV interfaces "+
				"replaces that fallback and can match a NIC only by MAC; set macAddress on interface %q, or give "+
				"networkData in the cloud-init volume", fb.Name, fb.Name)
		}
	}
	return append(append(make([]model.BoundInterface, 0, len(podNIC)+len(ifaces)), podNIC...), ifaces...), nil
}

func textOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// stringField finds a string field as encoding/json fills a struct field (CloudInitData has no json tags:
// keys are the Go field names, matched case-insensitively), returning the key to write back (the
// canonical name when absent) and the text (nil when absent or null). Two case-variants of one key are
// an error: their order would decide which one KubeVirt sees.
func stringField(fields map[string]field, name string) (key string, text *string, err error) {
	if key, err = fieldKey(fields, name); err != nil {
		return "", nil, err
	}
	f, ok := fields[key]
	switch {
	case f.text != nil:
		return key, f.text, nil
	case !ok || len(f.raw) == 0 || string(f.raw) == "null":
		return key, nil, nil
	default:
		return "", nil, fmt.Errorf("cloudInitData: field %s is not a string", key)
	}
}

// fieldKey is the key of obj that encoding/json would fill field name from, name itself when none.
func fieldKey[V any](obj map[string]V, name string) (string, error) {
	var keys []string
	for k := range obj {
		if strings.EqualFold(k, name) {
			keys = append(keys, k)
		}
	}
	switch len(keys) {
	case 0:
		return name, nil
	case 1:
		return keys[0], nil
	default:
		return "", fmt.Errorf("cloudInitData: field %s appears %d times with different letter cases", name, len(keys))
	}
}
