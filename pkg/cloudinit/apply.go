package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// Field names of KubeVirt's cloudinit.CloudInitData (pkg/cloud-init/cloud-init.go): it has no json tags,
// so the wire keys are the Go field names, and encoding/json matches them case-insensitively on the way in.
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
// rejects an empty UserData, and the hook manager then falls back to the legacy NoCloud source and drops
// the metadata (hooks/manager.go preCloudInitIsoValidateResult).
const minimalUserData = "#cloud-config\n"

// Apply merges our config for ifaces into the CloudInitData JSON and returns the new CloudInitData JSON
// plus the legacy v1.CloudInitNoCloudSource JSON to echo in PreCloudInitIsoResult.cloudInitNoCloudSource.
// It works on the raw JSON object so that every field it does not change (metadata, DevicesData,
// VolumeName, fields of newer KubeVirt versions) is passed back as it came.
// With no ifaces the data passes through unchanged, except that an empty UserData becomes
// "#cloud-config\n": returned as is, KubeVirt would reject it and lose the metadata (see minimalUserData).
//
// fallback is the NIC cloud-init's DHCP fallback would have configured (model.FindPodNIC): when
// the user gave no networkData, our config replaces that fallback, so it is configured by DHCP here too;
// without a MAC it cannot be matched and Apply refuses, naming the interface, rather than leave the
// guest's pod network down.
func Apply(cloudInitData []byte, ifaces []model.BoundInterface, fallback ...model.BoundInterface) (newData []byte, noCloudSourceJSON []byte, err error) {
	return ApplyWith(cloudInitData, ApplyOptions{}, ifaces, fallback...)
}

// ApplyOptions are what Apply does besides the network config.
type ApplyOptions struct {
	// WindowsNetworkScript adds, for a ConfigDrive datasource, the cloudbase-init PowerShell part that
	// applies what network_data.json cannot carry to cloudbase-init (windows.go); the VMI opts in with
	// WindowsNetworkScriptAnnotation.
	WindowsNetworkScript bool
	// Warn, when set, receives each case that works but is probably not meant (code: one of the Warn*
	// constants of this package); the caller logs or shows it.
	Warn func(code, message string)
}

func (o ApplyOptions) warn(code, message string) {
	if o.Warn != nil {
		o.Warn(code, message)
	}
}

// ApplyWith is Apply with options.
func ApplyWith(cloudInitData []byte, opts ApplyOptions, ifaces []model.BoundInterface, fallback ...model.BoundInterface) (newData []byte, noCloudSourceJSON []byte, err error) {
	obj, err := splitObject(cloudInitData)
	if err != nil {
		return nil, nil, fmt.Errorf("cloudInitData: not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, nil, fmt.Errorf("cloudInitData: is null (the VMI has no cloudInitNoCloud or cloudInitConfigDrive volume)")
	}
	userKey, userData, err := stringField(obj, fieldUserData)
	if err != nil {
		return nil, nil, err
	}
	networkKey, networkData, err := stringField(obj, fieldNetworkData)
	if err != nil {
		return nil, nil, err
	}
	changed := false
	if len(ifaces) == 0 && isEmptyJSONString(userData) {
		if userData, err = json.Marshal(minimalUserData); err != nil {
			return nil, nil, fmt.Errorf("cloudInitData: encoding %s: %w", userKey, err)
		}
		obj[userKey], changed = userData, true
	}
	if len(ifaces) > 0 {
		var userNetwork string
		if !isEmptyJSONString(networkData) {
			_ = json.Unmarshal(networkData, &userNetwork) // a non-string is reported by mergeNetworkData
		}
		if ifaces, err = WithFallback(ifaces, userNetwork, fallback...); err != nil {
			return nil, nil, err
		}
		dataSource, merged, err := mergeNetworkData(obj, networkData, userNetwork, ifaces)
		if err != nil {
			return nil, nil, err
		}
		var nd bytes.Buffer
		nd.Grow(len(merged) + len(merged)/8 + 2)
		if err := writeJSONString(&nd, string(merged)); err != nil { // no HTML escaping: the answer must fit 4 MiB
			return nil, nil, fmt.Errorf("cloudInitData: encoding %s: %w", networkKey, err)
		}
		networkData = nd.Bytes()
		obj[networkKey], changed = networkData, true

		// Our network config must reach the guest at every start, not only the first (userdata.go).
		var script string
		if opts.WindowsNetworkScript && dataSource == dataSourceConfigDrive {
			if script, err = WindowsNetworkScript([]byte(userNetwork), ifaces); err != nil {
				return nil, nil, fmt.Errorf("cloudInitData: Windows network script: %w", err)
			}
		}
		var user string
		if !isEmptyJSONString(userData) {
			if err := json.Unmarshal(userData, &user); err != nil {
				return nil, nil, fmt.Errorf("cloudInitData: field %s: %w", userKey, err)
			}
		}
		note, err := checkUserDataEncoding(user)
		if err != nil {
			return nil, nil, fmt.Errorf("cloudInitData: field %s: %w", userKey, err)
		}
		if note != "" {
			opts.warn(WarnUserDataReplacementChars, note)
		}
		if dataSource == dataSourceConfigDrive && script == "" && userWritesDropIn(user) {
			// Their entry wins; ours would be written after it and replace it (write_files runs in order).
			opts.warn(WarnUserDropInWins, fmt.Sprintf("the user data's write_files writes %s, the drop-in that makes "+
				"cloud-init apply the config drive's network config at every boot: the user's entry is kept and ours left out",
				configDriveDropInPath))
		} else if composed := composeUserData(user, dataSource, script); composed != user {
			var buf bytes.Buffer
			buf.Grow(len(composed) + len(composed)/8 + 2)
			if err := writeJSONString(&buf, composed); err != nil { // no HTML escaping of the user's text
				return nil, nil, fmt.Errorf("cloudInitData: encoding %s: %w", userKey, err)
			}
			userData = buf.Bytes()
			obj[userKey] = userData
		}
	}

	newData = cloudInitData
	if changed {
		if newData, err = encodeObject(obj); err != nil {
			return nil, nil, fmt.Errorf("cloudInitData: encoding: %w", err)
		}
	}
	// The legacy v1.CloudInitNoCloudSource (kubevirt.io/api core/v1 schema.go: userData, networkData,
	// both omitempty), from the JSON strings as they are.
	src := map[string]json.RawMessage{"userData": userData}
	if !isEmptyJSONString(networkData) {
		src["networkData"] = networkData
	}
	if noCloudSourceJSON, err = encodeObject(src); err != nil {
		return nil, nil, fmt.Errorf("cloudInitNoCloudSource: encoding: %w", err)
	}
	return newData, noCloudSourceJSON, nil
}

// mergeNetworkData merges ours into the NetworkData of the CloudInitData's DataSource, which it returns too.
// user is networkData decoded, "" when that failed.
func mergeNetworkData(obj map[string]json.RawMessage, networkData json.RawMessage, user string, ifaces []model.BoundInterface) (string, []byte, error) {
	var dataSource string
	if networkData != nil && user == "" {
		if err := json.Unmarshal(networkData, &user); err != nil {
			return "", nil, fmt.Errorf("cloudInitData: field NetworkData: %w", err)
		}
	}
	if _, raw, err := stringField(obj, fieldDataSource); err != nil {
		return "", nil, err
	} else if raw != nil {
		if err := json.Unmarshal(raw, &dataSource); err != nil {
			return "", nil, fmt.Errorf("cloudInitData: field DataSource: %w", err)
		}
	}
	var merged []byte
	var err error
	switch dataSource {
	case dataSourceNoCloud:
		merged, err = MergeNoCloud([]byte(user), ifaces)
	case dataSourceConfigDrive:
		merged, err = MergeNetworkDataJSON([]byte(user), ifaces)
	default:
		return "", nil, fmt.Errorf("cloudInitData: DataSource %q is neither %q nor %q", dataSource, dataSourceNoCloud, dataSourceConfigDrive)
	}
	if err != nil {
		return "", nil, fmt.Errorf("cloudInitData (DataSource %s): %w", dataSource, err)
	}
	return dataSource, merged, nil
}

// encodeObject writes a JSON object with sorted keys from values that are JSON already (validated by
// json.Unmarshal or produced by json.Marshal). It is what json.Marshal does for this map, minus a second
// validation pass over every value, which for a large UserData costs more than everything else here.
func encodeObject(obj map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(obj))
	size := 2
	for k, v := range obj {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	err := writeObjectMembers(buf, keys, "", ":", func(k string) error {
		if len(obj[k]) == 0 {
			return fmt.Errorf("field %s has no value", k)
		}
		buf.Write(obj[k])
		return nil
	})
	if err != nil {
		return nil, err
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// isEmptyJSONString reports whether a string field validated by stringField is absent, null or "".
// WithFallback returns ifaces plus the fallback NICs (model.FindPodNIC), first, when the user
// gave no networkData: our config then replaces cloud-init's DHCP fallback, so it must configure those
// NICs too. A fallback NIC without a MAC cannot be matched: that is an error naming it.
func WithFallback(ifaces []model.BoundInterface, userNetworkData string, fallback ...model.BoundInterface) ([]model.BoundInterface, error) {
	if len(fallback) == 0 || len(ifaces) == 0 || strings.TrimSpace(userNetworkData) != "" {
		return ifaces, nil
	}
	for _, fb := range fallback {
		if fb.MAC.IsZero() {
			return nil, fmt.Errorf("interface %q (pod network) has no macAddress: the VMI gives no networkData, so "+
				"cloud-init would configure that NIC by DHCP, but the network config written for the SR-IOV interfaces "+
				"replaces that fallback and can match a NIC only by MAC; set macAddress on interface %q, or give "+
				"networkData in the cloud-init volume", fb.Name, fb.Name)
		}
	}
	return append(append(make([]model.BoundInterface, 0, len(fallback)+len(ifaces)), fallback...), ifaces...), nil
}

func isEmptyJSONString(raw json.RawMessage) bool {
	return raw == nil || string(raw) == "null" || string(raw) == `""`
}

// stringField finds a string field as encoding/json fills a struct field: keys match case-insensitively.
// It returns the key to write back (the canonical name when absent) and the raw JSON string (nil when
// absent or null), checked to be a string without decoding it. Two case-variants of one key would leave
// it to their order which one KubeVirt sees, so that is an error.
func stringField(obj map[string]json.RawMessage, field string) (key string, raw json.RawMessage, err error) {
	var keys []string
	for k := range obj {
		if strings.EqualFold(k, field) {
			keys = append(keys, k)
		}
	}
	switch len(keys) {
	case 0:
		return field, nil, nil
	case 1:
		key = keys[0]
	default:
		return "", nil, fmt.Errorf("cloudInitData: field %s appears %d times with different letter cases", field, len(keys))
	}
	raw = obj[key]
	switch {
	case string(raw) == "null":
		return key, nil, nil
	case len(raw) > 0 && raw[0] == '"':
		return key, raw, nil // json.Unmarshal validated the whole document
	default:
		return "", nil, fmt.Errorf("cloudInitData: field %s is not a string", key)
	}
}
