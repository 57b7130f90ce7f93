package pipeline

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/domain"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

var opts = model.Options{BindingName: "sriov-udn"}

func vmiOf(t *testing.T, spec string) *model.VirtualMachineInstance {
	t.Helper()
	vmi, err := model.DecodeVMI([]byte(`{"metadata":{"name":"vm","namespace":"ns","uid":"u1"},"spec":` + spec + `}`))
	require.NoError(t, err)
	return vmi
}

const boundSpec = `{"domain":{"devices":{"interfaces":[
	{"name":"default","masquerade":{},"macAddress":"02:00:00:00:00:0a"},
	{"name":"vf1","macAddress":"02:00:00:00:01:01","binding":{"name":"sriov-udn"}}]}},
	"networks":[{"name":"default","pod":{}},{"name":"vf1","multus":{"networkName":"nad1"}}]%s}`

func snapOf(statusMAC string) *downwardapi.Snapshot {
	ns := `[{"name":"ns/nad1","interface":"` + model.HashedPodInterfaceName("vf1") + `","ips":["10.0.0.5"],"mac":"` + statusMAC +
		`","device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2"}}}]`
	return downwardapi.SnapshotFromMaps(nil, map[string]string{downwardapi.NetworkStatusAnnotation: ns})
}

func parsed(t *testing.T, vmi *model.VirtualMachineInstance, xml []byte) *domain.Document {
	t.Helper()
	doc, err := ParseDomain(context.Background(), vmi, opts, xml)
	require.NoError(t, err)
	return doc
}

// domainOf is OnDefineDomain's two steps: parse once, then Domain.
func domainOf(t *testing.T, vmi *model.VirtualMachineInstance, snap *downwardapi.Snapshot, xml []byte) ([]byte, []Warning, error) {
	t.Helper()
	return Domain(vmi, snap, opts, xml, parsed(t, vmi, xml))
}

func TestDomain_NothingBound_PassesThroughWithWarning(t *testing.T) {
	vmi := vmiOf(t, `{"domain":{"devices":{"interfaces":[{"name":"a","sriov":{}},{"name":"b","binding":{"name":"other"}},{"name":"c"}]}}}`)
	in := []byte("<domain><devices/></domain>")
	out, ws, err := domainOf(t, vmi, nil, in)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	require.Len(t, ws, 1)
	assert.Equal(t, WarnNothingBound, ws[0].Code)
	assert.Contains(t, ws[0].Message, `a uses KubeVirt's core "sriov" binding; b uses binding plugin "other"; c uses no binding`)

	_, ws, err = domainOf(t, vmiOf(t, `{"domain":{"devices":{}}}`), nil, in)
	require.NoError(t, err)
	assert.Contains(t, ws[0].Message, "the VMI has no interfaces")
}

func TestDomain_NoCloudInitVolume_Warns(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, ""))
	_, ws, err := domainOf(t, vmi, snapOf("02:00:00:00:01:01"), []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, WarnNoCloudInitVolume, ws[0].Code)

	vmi = vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitConfigDrive":{}}]`))
	_, ws, err = domainOf(t, vmi, snapOf("02:00:00:00:01:01"), []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	assert.Empty(t, ws)
}

func TestCloudInit_MACMismatch_WarnsWithoutAnnotationValue(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{}}]`))
	data := []byte(`{"DataSource":"noCloud","UserData":"#cloud-config\n"}`)
	_, ws, err := CloudInit(vmi, snapOf("02:00:00:00:01:99"), opts, data)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, Warning{Code: WarnMACMismatch, Interface: "vf1", Message: ws[0].Message}, ws[0])
	assert.Contains(t, ws[0].Message, "02:00:00:00:01:01")
	assert.Contains(t, ws[0].Message, "the mac in "+downwardapi.NetworkStatusAnnotation)
	assert.NotContains(t, ws[0].Message, "02:00:00:00:01:99", "annotation values stay out of warnings (they are logged)")

	_, ws, err = CloudInit(vmi, snapOf("02:00:00:00:01:01"), opts, data)
	require.NoError(t, err)
	assert.Empty(t, ws, "same MAC: nothing to say")
}

// KubeVirt v1.9's network-info carries mac and mtu (its copy of network-status): when the two disagree,
// network-status wins and the operator is told, by annotation key, never by value.
func TestCloudInit_NetworkInfoDisagreesWithNetworkStatus_WarnsNamingSourcesNotValues(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{}}]`))
	data := []byte(`{"DataSource":"noCloud","UserData":"#cloud-config\n"}`)
	ns := `[{"name":"ns/nad1","interface":"` + model.HashedPodInterfaceName("vf1") + `","ips":["10.0.0.5"],"mac":"02:00:00:00:01:01","mtu":1500,` +
		`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2"}}}]`
	snapWith := func(info string) *downwardapi.Snapshot {
		return downwardapi.SnapshotFromMaps(nil, map[string]string{downwardapi.NetworkStatusAnnotation: ns, downwardapi.NetworkInfoAnnotation: info})
	}

	_, ws, err := CloudInit(vmi, snapWith(`{"interfaces":[{"network":"vf1","mac":"02:00:00:00:01:77","mtu":9216}]}`), opts, data)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	for i, field := range []string{"mac", "mtu"} {
		assert.Equal(t, WarnNetworkInfoMismatch, ws[i].Code)
		assert.Equal(t, "vf1", ws[i].Interface)
		assert.Contains(t, ws[i].Message, "the "+field+" in "+downwardapi.NetworkInfoAnnotation)
		assert.NotContains(t, ws[i].Message, "02:00:00:00:01:77")
		assert.NotContains(t, ws[i].Message, "9216")
	}

	_, ws, err = CloudInit(vmi, snapWith(`{"interfaces":[{"network":"vf1","mac":"02:00:00:00:01:01","mtu":1500}]}`), opts, data)
	require.NoError(t, err)
	assert.Empty(t, ws, "agreeing copies: nothing to say")

	_, ws, err = CloudInit(vmi, snapWith(`{"interfaces":[{"network":"vf1","mac":"02:00:00:00:01:01"}]}`), opts, data)
	require.NoError(t, err)
	assert.Empty(t, ws, "v1.8 network-info has no mtu: nothing to compare")
}

func TestCloudInit_UserNetworkDataForOurMAC_Warns(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, ""))
	user, err := json.Marshal(map[string]string{"DataSource": "noCloud", "UserData": "#cloud-config\n",
		"NetworkData": "version: 2\nethernets:\n  x:\n    match: {macaddress: \"02:00:00:00:01:01\"}\n    dhcp4: true\n"})
	require.NoError(t, err)
	_, ws, err := CloudInit(vmi, snapOf("02:00:00:00:01:01"), opts, user)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, WarnUserNetworkDataWins, ws[0].Code)
	assert.Equal(t, "vf1", ws[0].Interface)
}

func TestCloudInit_PodNICWithoutMAC_FailsAsInvalidInputNamingTheHook(t *testing.T) {
	vmi := vmiOf(t, `{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{}},{"name":"vf1","macAddress":"02:00:00:00:01:01","binding":{"name":"sriov-udn"}}]}},
		"networks":[{"name":"default","pod":{}},{"name":"vf1","multus":{"networkName":"nad1"}}]}`)
	_, _, err := CloudInit(vmi, snapOf("02:00:00:00:01:01"), opts, []byte(`{"DataSource":"noCloud"}`))
	var pe *Error
	require.True(t, errors.As(err, &pe), "%v", err)
	assert.Equal(t, PreCloudInitIso, pe.Hook)
	assert.Equal(t, InvalidInput, pe.Kind)
	assert.Contains(t, err.Error(), `PreCloudInitIso: interface "default" (pod network) has no macAddress`)
}

func TestDomainNeed_ListsVFAddress_UnlessKubeVirtWiredIt(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, ""))
	empty := downwardapi.SnapshotFromMaps(nil, nil)
	need, err := DomainNeed(vmi, opts, parsed(t, vmi, []byte("<domain><devices></devices></domain>")))
	require.NoError(t, err)
	require.Len(t, need(empty), 1)
	assert.Equal(t, "deviceInfo.pci.pci-address", need(empty)[0].Field)

	wired := []byte(`<domain><devices><interface type="ethernet"><alias name="ua-vf1"/></interface></devices></domain>`)
	need, err = DomainNeed(vmi, opts, parsed(t, vmi, wired))
	require.NoError(t, err)
	assert.Empty(t, need(empty))

	_, err = ParseDomain(context.Background(), vmi, opts, []byte("<domain"))
	var pe *Error
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, InvalidInput, pe.Kind)
}

func TestVolumeCloudInitData(t *testing.T) {
	nd := "version: 1\nconfig: []\n"
	tests := []struct {
		name, volumes, wantDS, wantND, warn string
		ok                                  bool
	}{
		{"none", `[]`, "", "", "", false},
		{"noCloud inline", `[{"name":"c","cloudInitNoCloud":{"networkData":"x: 1"}}]`, "noCloud", "x: 1", "", true},
		{"configDrive base64", `[{"name":"c","cloudInitConfigDrive":{"networkDataBase64":"` + base64.StdEncoding.EncodeToString([]byte(nd)) + `"}}]`, "configDrive", nd, "", true},
		{"secret", `[{"name":"c","cloudInitNoCloud":{"networkDataSecretRef":{"name":"s"}}}]`, "noCloud", "", WarnNetworkDataInSecret, true},
		{"first volume wins", `[{"name":"d","containerDisk":{}},{"name":"a","cloudInitConfigDrive":{}},{"name":"b","cloudInitNoCloud":{}}]`, "configDrive", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vmi := vmiOf(t, `{"domain":{"devices":{}},"volumes":`+tc.volumes+`}`)
			data, ds, ws, ok, err := VolumeCloudInitData(vmi)
			require.NoError(t, err)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.wantDS, ds)
			if tc.warn != "" {
				require.Len(t, ws, 1)
				assert.Equal(t, tc.warn, ws[0].Code)
			}
			if ok {
				var d struct{ DataSource, NetworkData string }
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, tc.wantDS, d.DataSource)
				assert.Equal(t, tc.wantND, d.NetworkData)
			}
		})
	}
	_, _, _, _, err := VolumeCloudInitData(vmiOf(t, `{"domain":{"devices":{}},"volumes":[{"name":"c","cloudInitNoCloud":{"networkDataBase64":"%%%"}}]}`))
	assert.ErrorContains(t, err, `VMI volume "c": cloudInitNoCloud.networkDataBase64`)
}

func TestSortWarnings_OrdersAndDropsDuplicates(t *testing.T) {
	ws := SortWarnings([]Warning{{Code: "b"}, {Code: "a", Interface: "y"}, {Code: "a", Interface: "x"}, {Code: "b"}})
	assert.Equal(t, []Warning{{Code: "a", Interface: "x"}, {Code: "a", Interface: "y"}, {Code: "b"}}, ws)
}

func TestCloudInit_WindowsNetworkScript_OnlyWhenTheVMIOptsInOnAConfigDrive(t *testing.T) {
	spec := fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitConfigDrive":{}}]`)
	// A route that network_data.json cannot carry to cloudbase-init: the script adds it.
	ns := `[{"name":"ns/nad1","interface":"` + model.HashedPodInterfaceName("vf1") + `","ips":["10.0.0.5"],"mac":"02:00:00:00:01:01"}]`
	pn := `{"ns/nad1":{"ip_addresses":["10.0.0.5/24"],"mac_address":"02:00:00:00:01:01","routes":[{"dest":"10.9.0.0/16","nextHop":"10.0.0.1"}],"role":"secondary"}}`
	snap := downwardapi.SnapshotFromMaps(nil, map[string]string{downwardapi.NetworkStatusAnnotation: ns, downwardapi.PodNetworksAnnotation: pn})
	for _, tc := range []struct {
		name, annotation, dataSource string
		want                         bool
		wantErr                      string
	}{
		{"opted in, config drive", "true", "configDrive", true, ""},
		{"not opted in", "", "configDrive", false, ""},
		{"opted out", "false", "configDrive", false, ""},
		{"opted in, NoCloud: cloudbase-init reads only the config drive", "true", "noCloud", false, ""},
		{"a bad value names the annotation", "yes please", "configDrive", false, cloudinit.WindowsNetworkScriptAnnotation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string]any
			require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"name":"w","namespace":"ns"},"spec":`+spec+`}`), &doc))
			if tc.annotation != "" {
				doc["metadata"].(map[string]any)["annotations"] = map[string]any{cloudinit.WindowsNetworkScriptAnnotation: tc.annotation}
			}
			raw, err := json.Marshal(doc)
			require.NoError(t, err)
			vmi, err := model.DecodeVMI(raw)
			require.NoError(t, err)
			data := []byte(`{"DataSource":"` + tc.dataSource + `","UserData":"#cloud-config\n"}`)
			out, _, err := CloudInit(vmi, snap, opts, data)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var got struct{ UserData string }
			require.NoError(t, json.Unmarshal(out, &got))
			assert.Equal(t, tc.want, strings.Contains(got.UserData, cloudinit.WindowsNetworkScriptFilename), "user data:\n%s", got.UserData)
			if tc.want {
				assert.Contains(t, got.UserData, "10.9.0.0/16")
			}
		})
	}
}

func TestDomain_PodNICWithoutMAC_FilledFromThePod_OrWarnedAboutWhenTheDomainDisagrees(t *testing.T) {
	vmi := vmiOf(t, `{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{}},{"name":"vf1","macAddress":"02:00:00:00:01:01","binding":{"name":"sriov-udn"}}]}},
		"networks":[{"name":"default","pod":{}},{"name":"vf1","multus":{"networkName":"nad1"}}],"volumes":[{"name":"c","cloudInitNoCloud":{}}]}`)
	ns := `[{"name":"ovn-kubernetes","interface":"eth0","mac":"0a:58:0a:f4:01:0c","default":true},` +
		`{"name":"ns/nad1","interface":"` + model.HashedPodInterfaceName("vf1") + `","ips":["10.0.0.5"],"mac":"02:00:00:00:01:01",` +
		`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:65:00.2"}}}]`
	snap := downwardapi.SnapshotFromMaps(nil, map[string]string{downwardapi.NetworkStatusAnnotation: ns})
	const podIface = `<interface type="ethernet"><alias name="ua-default"/>%s</interface>`
	for _, tc := range []struct {
		name, mac, wantMAC string
		warn               bool
	}{
		{"no MAC in the domain: the pod interface's", "", "0a:58:0a:f4:01:0c", false},
		{"the same MAC: nothing to do", `<mac address="0a:58:0a:f4:01:0c"/>`, "0a:58:0a:f4:01:0c", false},
		{"another MAC: kept, and a warning", `<mac address="02:00:00:00:00:99"/>`, "02:00:00:00:00:99", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xml := []byte(`<domain><devices>` + fmt.Sprintf(podIface, tc.mac) + `</devices></domain>`)
			out, ws, err := domainOf(t, vmi, snap, xml)
			require.NoError(t, err)
			assert.Contains(t, string(out), tc.wantMAC)
			var codes []string
			for _, w := range ws {
				codes = append(codes, w.Code)
			}
			assert.Equal(t, tc.warn, slices.Contains(codes, WarnPodMACMismatch), "warnings: %v", ws)
		})
	}
}

// A PCI address that passes the input parsers passes every later step too: downwardapi and model
// once accepted a 5-digit domain (Intel VMD, 0x10000 and up) that domain.Apply then refused at
// OnDefineDomain. The rule now lives in pkg/netval alone.
func TestDomain_FiveDigitPCIDomain_AcceptedByEveryStep(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{}}]`))
	ns := `[{"name":"ns/nad1","interface":"` + model.HashedPodInterfaceName("vf1") + `","ips":["10.0.0.5"],"mac":"02:00:00:00:01:01",` +
		`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"10000:01:00.2"}}}]`
	snap := downwardapi.SnapshotFromMaps(nil, map[string]string{downwardapi.NetworkStatusAnnotation: ns})
	require.Empty(t, snap.Problems)
	out, _, err := domainOf(t, vmi, snap, []byte("<domain><devices></devices></domain>"))
	require.NoError(t, err)
	assert.Contains(t, string(out), `<address domain="0x10000" bus="0x01" slot="0x00" function="0x2">`)
}
