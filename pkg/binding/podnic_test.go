package binding

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
)

// sampleVMIWithPodNIC is the sample VMI with its pod-network interface rewritten by edit (a VMI as people
// write it has no macAddress there).
func sampleVMIWithPodNIC(t *testing.T, edit func(iface map[string]any)) []byte {
	t.Helper()
	_, raw := loadSample(t)
	var vmi map[string]any
	require.NoError(t, json.Unmarshal(raw, &vmi))
	ifaces := vmi["spec"].(map[string]any)["domain"].(map[string]any)["devices"].(map[string]any)["interfaces"].([]any)
	for _, i := range ifaces {
		if iface := i.(map[string]any); iface["name"] == "default" {
			edit(iface)
		}
	}
	out, err := json.Marshal(vmi)
	require.NoError(t, err)
	return out
}

func noMAC(core string) func(map[string]any) {
	return func(iface map[string]any) {
		delete(iface, "macAddress")
		delete(iface, "masquerade")
		iface[core] = map[string]any{}
	}
}

func podNICEntry(t *testing.T, networkData string) map[string]any {
	t.Helper()
	var nc struct {
		Config []map[string]any `json:"config"`
	}
	require.NoError(t, json.Unmarshal([]byte(networkData), &nc), "v1 network-config is JSON: %s", networkData)
	for _, e := range nc.Config {
		if e["mac_address"] == "0a:58:0a:f4:01:0c" {
			return e
		}
	}
	return nil
}

func TestPreCloudInitIso_PodNICWithoutMAC_DHCPMatchedByThePodInterfacesMAC(t *testing.T) {
	annotations, _ := loadSample(t)
	for _, core := range []string{"masquerade", "bridge"} {
		t.Run(core, func(t *testing.T) {
			b := newTestBinding(t, annotations, nil)
			data, err := b.PreCloudInitIso(context.Background(), sampleVMIWithPodNIC(t, noMAC(core)), []byte(noCloudInput))
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(data, &got))
			entry := podNICEntry(t, got["NetworkData"].(string))
			require.NotNil(t, entry, "the pod NIC, matched by network-status' default entry MAC: %s", got["NetworkData"])
			assert.Equal(t, []any{map[string]any{"type": "dhcp"}}, entry["subnets"])
		})
	}
}

func TestPreCloudInitIso_PodNICWithoutMAC_WaitsForThePodInterfacesMAC_ThenNamesIt(t *testing.T) {
	annotations, _ := loadSample(t)
	var netStatus []map[string]any
	require.NoError(t, json.Unmarshal([]byte(annotations[downwardapi.NetworkStatusAnnotation]), &netStatus))
	for _, st := range netStatus {
		delete(st, "default") // no entry marked default
	}
	raw, err := json.Marshal(netStatus)
	require.NoError(t, err)
	annotations[downwardapi.NetworkStatusAnnotation] = string(raw)
	delete(annotations, downwardapi.PodNetworksAnnotation)
	// The VFs still have what they need (network-status), only the pod MAC is missing.
	b := newTestBinding(t, annotations, nil)
	vmi := sampleVMIWithPodNIC(t, noMAC("masquerade"))
	_, err = b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
	require.Error(t, err)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Contains(t, err.Error(), "interface default (network default)")
	assert.Contains(t, err.Error(), "(entry with default: true)")
	assert.Contains(t, err.Error(), " mac")

	// With the user's own networkData the pod NIC is theirs: nothing to wait for.
	withND := strings.Replace(noCloudInput, `"NetworkData":""`, `"NetworkData":"version: 2\nethernets: {}\n"`, 1)
	var v map[string]any
	require.NoError(t, json.Unmarshal(vmi, &v))
	v["spec"].(map[string]any)["volumes"] = []any{map[string]any{"name": "cloudinitdisk",
		"cloudInitNoCloud": map[string]any{"networkData": "version: 2\nethernets: {}\n"}}}
	vmi, err = json.Marshal(v)
	require.NoError(t, err)
	_, err = b.PreCloudInitIso(context.Background(), vmi, []byte(withND))
	assert.NoError(t, err)
}

func TestPreCloudInitIso_PodNICOfAnotherPluginWithoutMAC_RefusedAtOnceWithTheReason(t *testing.T) {
	annotations, _ := loadSample(t)
	b := newTestBinding(t, annotations, nil)
	vmi := sampleVMIWithPodNIC(t, func(iface map[string]any) {
		delete(iface, "macAddress")
		delete(iface, "masquerade")
		iface["binding"] = map[string]any{"name": "passt"}
	})
	_, err := b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
	require.Error(t, err)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	for _, want := range []string{`interface "default"`, `binding "passt"`, "libvirt", "set macAddress", "networkData"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestOnDefineDomain_PodNICWithoutMAC_GetsThePodInterfacesMACWhenTheDomainHasNone(t *testing.T) {
	annotations, _ := loadSample(t)
	b := newTestBinding(t, annotations, nil)
	vmi := sampleVMIWithPodNIC(t, noMAC("masquerade"))
	dom := "<domain type='kvm'>\n  <devices>\n    <interface type='ethernet'>\n      <target dev='tap0' managed='no'/>\n" +
		"      <alias name='ua-default'/>\n    </interface>\n  </devices>\n</domain>\n"
	out, err := b.OnDefineDomain(context.Background(), vmi, []byte(dom))
	require.NoError(t, err)
	assert.Contains(t, string(out), "<interface type='ethernet'>\n      <mac address='0a:58:0a:f4:01:0c'/>\n      <target")

	// KubeVirt's own MAC stays, whatever it is.
	kept := strings.Replace(dom, "<target", "<mac address='02:00:00:00:00:99'/>\n      <target", 1)
	out, err = b.OnDefineDomain(context.Background(), vmi, []byte(kept))
	require.NoError(t, err)
	assert.Contains(t, string(out), "<mac address='02:00:00:00:00:99'/>")
	assert.NotContains(t, string(out), "0a:58:0a:f4:01:0c")

	// A VMI with macAddress: KubeVirt puts it in the domain; we add nothing.
	_, withMAC := loadSample(t)
	out, err = b.OnDefineDomain(context.Background(), withMAC, []byte(dom))
	require.NoError(t, err)
	assert.NotContains(t, string(out), "<mac address='0a:58")
}

func TestPreCloudInitIso_OnLinkRoutesFromOVNK_Accepted(t *testing.T) {
	annotations, vmi := loadSample(t)
	var pn map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(annotations[downwardapi.PodNetworksAnnotation]), &pn))
	// OVN-K marshals a nil next hop as ""; others write the unspecified address.
	pn["tenant-a/l2-secondary"]["routes"] = []any{
		map[string]any{"dest": "192.168.60.0/24", "nextHop": ""},
		map[string]any{"dest": "192.168.61.0/24", "nextHop": "0.0.0.0"},
		map[string]any{"dest": "fd60::/64", "nextHop": "::"},
	}
	raw, err := json.Marshal(pn)
	require.NoError(t, err)
	annotations[downwardapi.PodNetworksAnnotation] = string(raw)
	b := newTestBinding(t, annotations, nil)
	data, err := b.PreCloudInitIso(context.Background(), vmi, []byte(noCloudInput))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	nd := got["NetworkData"].(string)
	for _, want := range []string{`"network": "192.168.60.0"`, `"network": "192.168.61.0"`, `"network": "fd60::"`, `"gateway": "0.0.0.0"`, `"gateway": "::"`} {
		assert.Contains(t, nd, want)
	}
}
