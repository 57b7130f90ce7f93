package cloudinit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// benchIfaces returns n dual-stack NICs with a default route per family, an IPv4 route, DNS and MTU:
// the most each NIC can carry.
func benchIfaces(n int) []model.BoundInterface {
	out := make([]model.BoundInterface, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, nic(fmt.Sprintf("net%d", i), fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256), func(b *model.BoundInterface) {
			b.Addresses = pfx(fmt.Sprintf("10.%d.0.5/16", i), fmt.Sprintf("fd00:%x::5/64", i))
			b.Gateways = addrs(fmt.Sprintf("10.%d.0.1", i), fmt.Sprintf("fd00:%x::1", i))
			b.Routes = []model.Route{route(fmt.Sprintf("100.%d.0.0/16", i), fmt.Sprintf("10.%d.0.1", i))}
			b.DNS = model.DNS{Nameservers: addrs("172.30.0.10"), Search: []string{"ns1.svc.cluster.local", "svc.cluster.local"}}
			b.MTU = 1400
		}))
	}
	return out
}

var benchSizes = []int{1, 8, 64}

func benchRender(b *testing.B, render func([]model.BoundInterface) ([]byte, error)) {
	for _, n := range benchSizes {
		ifaces := benchIfaces(n)
		b.Run(fmt.Sprintf("ifaces=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := render(ifaces); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRenderNetworkConfigV1(b *testing.B) { benchRender(b, RenderNetworkConfigV1) }
func BenchmarkRenderNetworkConfigV2(b *testing.B) { benchRender(b, renderNetworkConfigV2) }
func BenchmarkRenderNetworkDataJSON(b *testing.B) { benchRender(b, renderNetworkDataJSON) }

const benchUserV2 = "version: 2\nethernets:\n  eth0:\n    match: {macaddress: \"02:00:00:00:ff:01\"}\n    dhcp4: true\n"

func BenchmarkMergeNoCloud(b *testing.B) {
	benchRender(b, func(ifaces []model.BoundInterface) ([]byte, error) { return MergeNoCloud([]byte(benchUserV2), ifaces) })
}

func BenchmarkMergeNetworkDataJSON(b *testing.B) {
	user := []byte(`{"links":[{"id":"tap0","type":"phy","ethernet_mac_address":"02:00:00:00:ff:01"}],"networks":[{"id":"n0","type":"ipv4_dhcp","link":"tap0"}],"services":[]}`)
	benchRender(b, func(ifaces []model.BoundInterface) ([]byte, error) { return MergeNetworkDataJSON(user, ifaces) })
}

// BenchmarkApply carries 256 KiB of user-data through the CloudInitData round trip.
func BenchmarkApply(b *testing.B) {
	data, err := json.Marshal(map[string]any{
		"DataSource": "noCloud", "NoCloudMetaData": map[string]string{"instance-id": "x"},
		"UserData": "#cloud-config\n# " + strings.Repeat("x", 256<<10) + "\n", "NetworkData": benchUserV2, "VolumeName": "cloudinitdisk",
	})
	if err != nil {
		b.Fatal(err)
	}
	benchRender(b, func(ifaces []model.BoundInterface) ([]byte, error) {
		out, err := Apply(data, ifaces)
		return out, err
	})
}

// BenchmarkApply_SecretUserDataOfControlBytes carries the largest user data, a 1 MiB Secret of control
// bytes, which arrives JSON-escaped as 6 MiB of \u00XX: the peak the sidecar's memory limit must hold.
func BenchmarkApply_SecretUserDataOfControlBytes(b *testing.B) {
	data, err := json.Marshal(map[string]any{
		"DataSource": "noCloud", "NoCloudMetaData": map[string]string{"instance-id": "x"},
		"UserData": "#cloud-config\n# " + strings.Repeat("\x01", 1<<20-32) + "\n", "NetworkData": benchUserV2, "VolumeName": "cloudinitdisk",
	})
	if err != nil {
		b.Fatal(err)
	}
	ifaces := benchIfaces(8)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Apply(data, ifaces); err != nil {
			b.Fatal(err)
		}
	}
}
