package cloudinit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// kubevirtCloudInitData mirrors the wire form of KubeVirt's cloudinit.CloudInitData
// (pkg/cloud-init/cloud-init.go): Go field names, no json tags; the metadata stays raw.
type kubevirtCloudInitData struct {
	DataSource          string
	NoCloudMetaData     json.RawMessage
	ConfigDriveMetaData json.RawMessage
	UserData            string
	NetworkData         string
	DevicesData         json.RawMessage
	VolumeName          string
}

const (
	noCloudInput = `{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"6b1a-uuid","local-hostname":"vm1","public-keys":{"k":"ssh-ed25519 AAAA"}},` +
		`"ConfigDriveMetaData":null,"UserData":"","NetworkData":"","DevicesData":null,"VolumeName":"cloudinitdisk","FutureField":{"x":[1,2]}}`
	configDriveInput = `{"DataSource":"configDrive","NoCloudMetaData":null,"ConfigDriveMetaData":{"instance_id":"i-1","uuid":"6b1a","hostname":"vm1"},` +
		`"UserData":"#!/bin/sh\necho hi <&> \n","NetworkData":"","DevicesData":[{"type":"nic","bus":"pci","address":"0000:01:00.0","tags":["a"]}],"VolumeName":"cloudinitdisk"}`
)

func TestApply_NoCloud_RendersV1_KeepsMetadata_FillsEmptyUserData(t *testing.T) {
	out, err := Apply([]byte(noCloudInput), mergeIfaces())
	require.NoError(t, err)

	var got kubevirtCloudInitData
	require.NoError(t, json.Unmarshal(out, &got))
	want, err := RenderNetworkConfigV1(mergeIfaces())
	require.NoError(t, err)
	assert.Equal(t, string(want), got.NetworkData)
	// KubeVirt's IsValidCloudInitData needs a UserData; ours makes every boot apply the network config.
	assert.Equal(t, networkEveryBootNoCloud, got.UserData)
	assert.True(t, strings.HasPrefix(got.UserData, "#cloud-config\n"))
	assert.Equal(t, "noCloud", got.DataSource)
	assert.JSONEq(t, `{"instance-id":"6b1a-uuid","local-hostname":"vm1","public-keys":{"k":"ssh-ed25519 AAAA"}}`, string(got.NoCloudMetaData))
	assert.Equal(t, "cloudinitdisk", got.VolumeName)
	assertUnchangedExcept(t, noCloudInput, string(out), "UserData", "NetworkData")
}

func TestApply_ConfigDrive_RendersNetworkDataJSON_KeepsUserDataAndDevices(t *testing.T) {
	out, err := Apply([]byte(configDriveInput), mergeIfaces())
	require.NoError(t, err)
	var got kubevirtCloudInitData
	require.NoError(t, json.Unmarshal(out, &got))
	want, err := renderNetworkDataJSON(mergeIfaces())
	require.NoError(t, err)
	assert.Equal(t, string(want), got.NetworkData)
	user, ours := splitUserData(t, got.UserData)
	assert.Equal(t, "#!/bin/sh\necho hi <&> \n", user, "the user's script travels unchanged as the first part")
	assert.Equal(t, networkEveryBootConfigDrive, ours)
	assertUnchangedExcept(t, configDriveInput, string(out), "NetworkData", "UserData")
	assert.Contains(t, string(out), `<&>`, "no HTML escaping of the user's data")
}

func TestApply_MergesIntoUserNetworkDataOfTheirVersion(t *testing.T) {
	in := map[string]any{"DataSource": "noCloud", "NoCloudMetaData": map[string]string{"instance-id": "x"}, "UserData": "#cloud-config\n",
		"NetworkData": "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := Apply(data, mergeIfaces())
	require.NoError(t, err)
	var got kubevirtCloudInitData
	require.NoError(t, json.Unmarshal(out, &got))
	want, err := MergeNoCloud([]byte(in["NetworkData"].(string)), mergeIfaces())
	require.NoError(t, err)
	assert.Equal(t, string(want), got.NetworkData)
	assert.Contains(t, got.NetworkData, "version: 2")
}

func TestApply_NoInterfaces_PassesThroughByteForByte(t *testing.T) {
	in := `{"DataSource":"noCloud", "NoCloudMetaData":{"instance-id":"x"},"UserData":"#cloud-config\nfoo: 1\n","NetworkData":"version: 7 # theirs, not ours to judge\n","VolumeName":"v"}`
	out, err := Apply([]byte(in), nil)
	require.NoError(t, err)
	assert.Equal(t, in, string(out))
}

func TestApply_NoInterfaces_EmptyUserDataStillBecomesCloudConfig(t *testing.T) {
	out, err := Apply([]byte(noCloudInput), nil)
	require.NoError(t, err)
	var got kubevirtCloudInitData
	require.NoError(t, json.Unmarshal(out, &got))
	assert.Equal(t, "#cloud-config\n", got.UserData)
	assertUnchangedExcept(t, noCloudInput, string(out), "UserData")
}

func TestApply_FieldNamesMatchCaseInsensitively_LikeEncodingJSON(t *testing.T) {
	in := `{"dataSource":"noCloud","noCloudMetaData":{"instance-id":"x"},"userdata":"#cloud-config\n","networkdata":""}`
	out, err := Apply([]byte(in), mergeIfaces())
	require.NoError(t, err)
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out, &obj))
	assert.Contains(t, obj, "networkdata", "written back under the key it came with")
	assert.NotContains(t, obj, "NetworkData")
	var got kubevirtCloudInitData
	require.NoError(t, json.Unmarshal(out, &got))
	assert.Contains(t, got.NetworkData, `"version": 1`)
}

func TestApply_RejectsBadInput_NamingTheField(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `{"DataSource":`, "cloudInitData: not a JSON object"},
		{"null", `null`, "cloudInitData: is null"},
		{"a list", `[]`, "cloudInitData: not a JSON object"},
		{"unknown data source", `{"DataSource":"ec2","UserData":"x"}`, `DataSource "ec2"`},
		{"no data source", `{"UserData":"x"}`, `DataSource ""`},
		{"UserData not a string", `{"DataSource":"noCloud","UserData":5}`, "field UserData is not a string"},
		{"two spellings", `{"DataSource":"noCloud","UserData":"a","userData":"b"}`, "field UserData appears 2 times"},
		{"bad noCloud networkData", `{"DataSource":"noCloud","UserData":"x","NetworkData":"version: [1"}`, "cloudInitData (DataSource noCloud): noCloud networkData: parsing YAML"},
		{"bad configDrive networkData", `{"DataSource":"configDrive","UserData":"x","NetworkData":"version: 2"}`, "cloudInitData (DataSource configDrive): configDrive networkData (network_data.json): not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Apply([]byte(tc.in), mergeIfaces())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// assertUnchangedExcept checks that every top-level field of in except the named ones is in out with the
// same JSON value, and that out has no other fields.
func assertUnchangedExcept(t *testing.T, in, out string, changed ...string) {
	t.Helper()
	var a, b map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(in), &a))
	require.NoError(t, json.Unmarshal([]byte(out), &b))
	for _, k := range changed {
		delete(a, k)
		delete(b, k)
	}
	require.Equal(t, len(a), len(b), "fields added or lost")
	for k, v := range a {
		assert.True(t, jsonEqual(v, b[k]), "field %s: %s became %s", k, v, b[k])
	}
}

// Any network config we write replaces cloud-init's DHCP fallback (stages.py uses the datasource's
// config whenever there is one), so with no user networkData the pod-network NIC must be in ours.
func TestApply_NoUserNetworkData_PodNICGetsTheDHCPTheFallbackWouldHaveGiven(t *testing.T) {
	podNIC := model.BoundInterface{Name: "default", Network: "default", MAC: mac("02:00:00:00:00:0a"), MACSource: model.MACFromVMI, DHCP: true}
	tests := []struct {
		name      string
		input     string
		fallback  []model.BoundInterface
		wantPod   bool
		wantError string
	}{
		{"noCloud without networkData", noCloudInput, []model.BoundInterface{podNIC}, true, ""},
		{"configDrive without networkData", configDriveInput, []model.BoundInterface{podNIC}, true, ""},
		{"user networkData configures the guest", `{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"i"},"UserData":"#cloud-config\n","NetworkData":"version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"}`, []model.BoundInterface{podNIC}, false, ""},
		{"blank networkData counts as none", `{"DataSource":"noCloud","NoCloudMetaData":{"instance-id":"i"},"UserData":"#cloud-config\n","NetworkData":"  \n"}`, []model.BoundInterface{podNIC}, true, ""},
		{"no pod NIC", noCloudInput, nil, false, ""},
		{"pod NIC without MAC", noCloudInput, []model.BoundInterface{{Name: "default", Network: "default", DHCP: true}}, false, `interface "default" (pod network) has no macAddress`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Apply([]byte(tc.input), mergeIfaces(), tc.fallback...)
			if tc.wantError != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantError)
				assert.Contains(t, err.Error(), "set macAddress")
				return
			}
			require.NoError(t, err)
			var got kubevirtCloudInitData
			require.NoError(t, json.Unmarshal(out, &got))
			assert.Equal(t, tc.wantPod, strings.Contains(got.NetworkData, "02:00:00:00:00:0a"), got.NetworkData)
			for _, ours := range mergeIfaces() {
				assert.Contains(t, got.NetworkData, ours.MAC.String(), "our NICs are always there")
			}
		})
	}
}

func TestGuestName_NamesTheKernelRefusesAreHashed(t *testing.T) {
	for _, name := range []string{"default", "all"} {
		got := guestName(name)
		assert.NotEqual(t, name, got, "`ip link set X name %s` fails with EINVAL", name)
		assert.Regexp(t, `^vf[0-9a-f]{11}$`, got)
	}
	assert.Equal(t, "defaults", guestName("defaults"), "only the exact reserved names")
	assert.Equal(t, "sriov-l2", guestName("sriov-l2"))
}

func TestGuestNameOf_PodNetworkNICIsNotNamedVF(t *testing.T) {
	tests := []struct {
		name   string
		virtio bool
		want   string
	}{
		{"sriov-l2", false, "sriov-l2"},
		{"sriov-l2", true, "sriov-l2"},
		{"default", false, guestName("default")},
		{"default", true, "nic" + strings.TrimPrefix(guestName("default"), "vf")},
		{"eth0", true, "nic" + strings.TrimPrefix(guestName("eth0"), "vf")},
	}
	for _, tc := range tests {
		b := model.BoundInterface{Name: tc.name, Virtio: tc.virtio}
		got := guestNameOf(&b)
		assert.Equal(t, tc.want, got, tc.name)
		if tc.virtio {
			assert.False(t, strings.HasPrefix(got, "vf"), "%s: a virtio NIC is not named vf…", tc.name)
		}
	}
	assert.True(t, strings.HasPrefix(guestName("default"), "vf"))
}

func TestApply_FallbackPodNIC_GuestNameSaysNIC(t *testing.T) {
	fb := model.BoundInterface{Name: "default", Network: "default", DHCP: true, Virtio: true, MAC: netval.MAC{2, 0, 0, 0, 0, 0x0a}}
	vf := model.BoundInterface{Name: "vf1", Network: "vf1", MAC: netval.MAC{2, 0, 0, 0, 1, 1}}
	out, err := MergeNoCloud(nil, []model.BoundInterface{fb, vf})
	require.NoError(t, err)
	assert.Contains(t, string(out), `"name": "nic`)
	assert.NotContains(t, string(out), `"name": "vf3`)
}

func TestUserConfigured_NamesOurNICsTheUserAlreadyConfigures(t *testing.T) {
	ifaces := []model.BoundInterface{
		{Name: "a", MAC: netval.MAC{2, 0, 0, 0, 0, 1}},
		{Name: "b", MAC: netval.MAC{2, 0, 0, 0, 0, 2}},
		{Name: "c", MAC: netval.MAC{2, 0, 0, 0, 0, 0x0c}},
	}
	tests := []struct {
		name, ds, user string
		want           []string
	}{
		{"none", "noCloud", "", nil},
		{"v1 by MAC", "noCloud", "version: 1\nconfig:\n- type: physical\n  name: x\n  mac_address: '02:00:00:00:00:02'\n", []string{"b"}},
		{"v2 by MAC, upper case", "noCloud", "network:\n  version: 2\n  ethernets:\n    x:\n      match: {macaddress: '02:00:00:00:00:0C'}\n", []string{"c"}},
		{"v2 by MAC", "noCloud", "version: 2\nethernets:\n  x:\n    match: {macaddress: '02:00:00:00:00:01'}\n", []string{"a"}},
		{"v2 by name", "noCloud", "version: 2\nethernets:\n  b: {dhcp4: true}\n", []string{"b"}},
		{"configDrive by MAC", "configDrive", `{"links":[{"id":"l","ethernet_mac_address":"02:00:00:00:00:01"}]}`, []string{"a"}},
		{"configDrive other MAC", "configDrive", `{"links":[{"id":"l","ethernet_mac_address":"02:00:00:00:00:09"}]}`, nil},
		{"unparseable", "noCloud", "{", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, UserConfigured(tc.ds, []byte(tc.user), ifaces))
		})
	}
}
