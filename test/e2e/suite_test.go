package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The sidecar's own rendered configs (pkg/cloudinit's golden files), v1 and v2.
func TestAddressesForMAC_TheSidecarsRenderedConfigs(t *testing.T) {
	for _, file := range []string{"dual-stack-ipv4-primary.v1.yaml", "dual-stack-ipv4-primary.v2.yaml"} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "cloudinit", "testdata", "golden", "render", file))
			require.NoError(t, err)
			got, err := AddressesForMAC(b, "02:00:00:AA:BB:01")
			require.NoError(t, err)
			assert.Equal(t, []string{"10.20.2.5/24", "fd00:10:20::5/64"}, got)
		})
	}
}

func TestAddressesForMAC(t *testing.T) {
	for _, tc := range []struct {
		name, config, mac string
		want              []string
		err               string
	}{
		{name: "v2 under network:, two NICs", mac: "02:00:00:00:00:02", want: []string{"192.168.70.2/24"},
			config: "network:\n  version: 2\n  ethernets:\n    a: {match: {macaddress: '02:00:00:00:00:01'}, dhcp4: true}\n" +
				"    b:\n      match: {macaddress: '02:00:00:00:00:02'}\n      addresses: [192.168.70.2/24]\n"},
		{name: "v1, dhcp and static6", mac: "02:00:00:00:00:02", want: []string{"fd70::2/64"},
			config: "version: 1\nconfig:\n- {type: physical, mac_address: '02:00:00:00:00:02', subnets: [{type: dhcp}, {type: static6, address: 'fd70::2/64'}]}\n" +
				"- {type: nameserver, address: [192.168.70.53]}\n"},
		{name: "a NIC without addresses", mac: "02:00:00:00:00:01",
			config: "version: 2\nethernets: {a: {match: {macaddress: '02:00:00:00:00:01'}, dhcp4: true}}\n"},
		{name: "no NIC of the MAC", mac: "02:00:00:00:00:09", err: "no NIC of MAC 02:00:00:00:00:09",
			config: "version: 2\nethernets: {a: {match: {macaddress: '02:00:00:00:00:01'}}}\n"},
		{name: "unknown version", mac: "02:00:00:00:00:01", err: "version 3", config: "version: 3\n"},
		{name: "no version", mac: "02:00:00:00:00:01", err: "version 0", config: "ethernets: {}\n"},
		{name: "not YAML", mac: "02:00:00:00:00:01", err: "network-config:", config: "version: [1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AddressesForMAC([]byte(tc.config), tc.mac)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzAddressesForMAC(f *testing.F) {
	f.Add([]byte("network: {version: 2, ethernets: {a: {match: {macaddress: '02:00:00:00:00:01'}, addresses: [10.0.0.1/24]}}}"), "02:00:00:00:00:01")
	f.Add([]byte(`{"version": 1, "config": [{"type": "physical", "mac_address": "02:00:00:00:00:01", "subnets": [{"type": "static", "address": "10.0.0.1/24"}]}]}`), "02:00:00:00:00:01")
	f.Fuzz(func(t *testing.T, config []byte, mac string) {
		got, err := AddressesForMAC(config, mac)
		if err != nil {
			assert.Nil(t, got)
		}
	})
}

const fixtureVM = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm-e2e, namespace: ns}
spec:
  template:
    spec:
      volumes:
      - {name: root, containerDisk: {image: disk}}
      - {name: cloudinit, cloudInitNoCloud: {userData: "#cloud-config\n"}}
`

func TestFixtureDocs(t *testing.T) {
	ns := "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n"
	nad := "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: n, namespace: ns}\n"
	namespaces, bad, err := fixtureDocs([]byte(ns+"---\n"+nad+"---\n"+fixtureVM), "vm-e2e")
	require.NoError(t, err)
	require.Len(t, namespaces, 1)
	assert.Contains(t, string(namespaces[0]), "kind: Namespace")
	var vm kubevirtv1.VirtualMachine
	require.NoError(t, json.Unmarshal(bad, &vm))
	assert.Equal(t, "vm-e2e", vm.Name)
	require.Len(t, vm.Spec.Template.Spec.Volumes, 1, "the cloud-init volume dropped, the other kept")
	assert.Equal(t, "root", vm.Spec.Template.Spec.Volumes[0].Name)

	_, _, err = fixtureDocs([]byte(ns+"---\n"+fixtureVM), "other")
	assert.ErrorContains(t, err, "no VirtualMachine other")
	_, _, err = fixtureDocs([]byte(fixtureVM[:len(fixtureVM)-len("      - {name: cloudinit, cloudInitNoCloud: {userData: \"#cloud-config\\n\"}}\n")]), "vm-e2e")
	assert.ErrorContains(t, err, "no cloudInitNoCloud volume")
	_, _, err = fixtureDocs([]byte("kind: [\n"), "vm-e2e")
	assert.ErrorContains(t, err, "fixtures:")
}

func TestBoundInterface(t *testing.T) {
	vmi := func(ifaces []kubevirtv1.Interface, nets []kubevirtv1.Network) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}}
		v.Spec.Domain.Devices.Interfaces, v.Spec.Networks = ifaces, nets
		return v
	}
	pod := kubevirtv1.Interface{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}
	ours := kubevirtv1.Interface{Name: "blue", Binding: &kubevirtv1.PluginBinding{Name: Binding}, MacAddress: "02:00:00:00:00:02"}
	multus := func(name, nad string) kubevirtv1.Network {
		return kubevirtv1.Network{Name: name, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: nad}}}
	}
	podNet := kubevirtv1.Network{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}

	got, network, err := boundInterface(vmi([]kubevirtv1.Interface{pod, ours}, []kubevirtv1.Network{podNet, multus("blue", "blue-nad")}))
	require.NoError(t, err)
	assert.Equal(t, "blue", got.Name)
	assert.Equal(t, "ns/blue-nad", network, "a NAD of the VMI's namespace")
	_, network, err = boundInterface(vmi([]kubevirtv1.Interface{ours}, []kubevirtv1.Network{multus("blue", "other/nad")}))
	require.NoError(t, err)
	assert.Equal(t, "other/nad", network)

	_, _, err = boundInterface(vmi([]kubevirtv1.Interface{pod}, []kubevirtv1.Network{podNet}))
	assert.ErrorContains(t, err, "no interface bound to sriov-udn")
	noMAC := ours
	noMAC.MacAddress = ""
	_, _, err = boundInterface(vmi([]kubevirtv1.Interface{noMAC}, []kubevirtv1.Network{multus("blue", "nad")}))
	assert.ErrorContains(t, err, "no macAddress")
	_, _, err = boundInterface(vmi([]kubevirtv1.Interface{ours}, []kubevirtv1.Network{podNet}))
	assert.ErrorContains(t, err, "no multus network")
}

func TestPodNetworksAddresses(t *testing.T) {
	pod := func(value string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"k8s.ovn.org/pod-networks": value}}}
	}
	got, err := podNetworksAddresses(pod(`{"ns/blue":{"ip_addresses":["10.200.0.10/24","fd70::0a/64"]},"default":{"ip_addresses":["10.244.0.5/24"]}}`), "ns/blue")
	require.NoError(t, err)
	assert.Equal(t, []string{"10.200.0.10/24", "fd70::a/64"}, got, "canonical CIDR, as the sidecar renders it")

	_, err = podNetworksAddresses(pod(`{"ns/red":{}}`), "ns/blue")
	assert.ErrorContains(t, err, "has no ns/blue")
	_, err = podNetworksAddresses(pod(`{"ns/blue":{"ip_addresses":["10.200.0.10"]}}`), "ns/blue")
	assert.ErrorContains(t, err, "ns/blue")
	_, err = podNetworksAddresses(pod(`{`), "ns/blue")
	assert.ErrorContains(t, err, "k8s.ovn.org/pod-networks of pod p")
	_, err = podNetworksAddresses(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, "ns/blue")
	assert.ErrorContains(t, err, "has no k8s.ovn.org/pod-networks")
}

func TestHookCalls(t *testing.T) {
	logs := `{"level":"INFO","msg":"socket ready"}
{"level":"INFO","msg":"hook call","hook":"OnDefineDomain","outcome":"ok"}
not json
{"level":"ERROR","msg":"hook call","hook":"PreCloudInitIso","outcome":"error"}
{"level":"INFO","msg":"hook call","hook":"PreCloudInitIso","outcome":"ok"}
`
	calls, err := hookCalls([]byte(logs))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"OnDefineDomain": {"ok"}, "PreCloudInitIso": {"error", "ok"}}, calls)
}

// sidecarUserData is the user-data our sidecar gave KubeVirt for "#cloud-config" on the registry-free cluster
// (make test-cluster): the user's data as the first part, the sidecar's every-boot network part after it.
const sidecarUserData = "Content-Type: multipart/mixed; boundary=\"==sriov-udn-binding-a1b0542e7cce032c==\"\nMIME-Version: 1.0\n\n" +
	"--==sriov-udn-binding-a1b0542e7cce032c==\nContent-Type: text/cloud-config; charset=\"utf-8\"\nContent-Transfer-Encoding: 7bit\n" +
	"Content-Disposition: attachment; filename=\"user-data\"\n\n#cloud-config\n" +
	"--==sriov-udn-binding-a1b0542e7cce032c==\nContent-Type: text/cloud-config; charset=\"us-ascii\"\nContent-Transfer-Encoding: 7bit\n" +
	"Merge-Type: dict(no_replace,recurse_dict)+list()+str()\nContent-Disposition: attachment; filename=\"sriov-udn-binding-network-every-boot.cfg\"\n\n" +
	"#cloud-config\nupdates:\n  network:\n    when: [boot-new-instance, boot]\n\n--==sriov-udn-binding-a1b0542e7cce032c==--\n"

func TestUserDataParts(t *testing.T) {
	for _, tc := range []struct {
		name, userData string
		want           []string
		err            string
	}{
		{name: "the sidecar's multipart", userData: sidecarUserData,
			want: []string{"#cloud-config", "#cloud-config\nupdates:\n  network:\n    when: [boot-new-instance, boot]"}},
		{name: "CRLF multipart", userData: "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n#cloud-config\r\nruncmd: [x]\r\n--b--\r\n",
			want: []string{"#cloud-config\r\nruncmd: [x]"}},
		{name: "a base64 part", userData: "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Transfer-Encoding: base64\n\n" +
			"I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogw6lsw6hu\n--b--\n", want: []string{"#cloud-config\nhostname: \u00e9l\u00e8n"}},
		{name: "plain cloud-config", userData: "#cloud-config\npackages: [jq]\n", want: []string{"#cloud-config\npackages: [jq]"}},
		{name: "a script", userData: "#!/bin/sh\necho hi\n", want: []string{"#!/bin/sh\necho hi"}},
		{name: "multipart with no part", userData: "Content-Type: multipart/mixed; boundary=b\n\n--b--\n", err: "no part"},
		{name: "multipart cut short", userData: "Content-Type: multipart/mixed; boundary=b\n\n--b\n\nx", err: "multipart part 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UserDataParts([]byte(tc.userData))
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func FuzzUserDataParts(f *testing.F) {
	f.Add([]byte(sidecarUserData))
	f.Add([]byte("#cloud-config\n"))
	f.Fuzz(func(t *testing.T, userData []byte) {
		parts, err := UserDataParts(userData)
		if err == nil {
			assert.NotEmpty(t, parts)
		}
	})
}
