package model_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/netval"
)

// dualStackFixture is a VMI with n bound dual-stack interfaces and a snapshot holding every source.
func dualStackFixture(n int) (*model.VirtualMachineInstance, *downwardapi.Snapshot) {
	specs := make([]ifaceSpec, 0, n)
	snap := &downwardapi.Snapshot{PodInfo: true, PodNetworks: downwardapi.PodNetworks{}, DeviceInfo: &downwardapi.NetworkInfo{}}
	for i := 0; i < n; i++ {
		name, nad := fmt.Sprintf("net-%d", i), fmt.Sprintf("ns1/sriov-%d", i)
		specs = append(specs, bound(name, nad))
		v4 := netip.AddrFrom4([4]byte{10, byte(i), 0, 5})
		v6 := netip.MustParseAddr(fmt.Sprintf("fd00:%x::5", i))
		snap.NetworkStatus = append(snap.NetworkStatus, downwardapi.NetworkStatus{
			Name: nad, Interface: model.HashedPodInterfaceName(name), IPs: []string{v4.String(), v6.String()},
			Mac: fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256), Mtu: 1500,
			DNS:        downwardapi.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"ns1.svc.cluster.local", "cluster.local"}},
			DeviceInfo: pciInfo(fmt.Sprintf("0000:%02x:00.%d", 0x65+i/8, i%8)),
		})
		snap.PodNetworks[nad] = downwardapi.PodNetwork{
			IPAddresses: []netip.Prefix{netip.PrefixFrom(v6, 64), netip.PrefixFrom(v4, 24)},
			MAC:         netval.MAC{0x0a, 0x58, 0, 0, byte(i / 256), byte(i % 256)},
			Gateways:    []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i), 0, 1})},
			Routes: []downwardapi.PodRoute{
				{Dest: netip.MustParsePrefix("10.96.0.0/16"), NextHop: netip.AddrFrom4([4]byte{10, byte(i), 0, 1})},
				{Dest: netip.MustParsePrefix("fd00:10:96::/112"), NextHop: netip.MustParseAddr(fmt.Sprintf("fd00:%x::1", i))},
			},
			Role: "primary",
		}
		snap.DeviceInfo.Interfaces = append(snap.DeviceInfo.Interfaces, downwardapi.NetworkInfoInterface{
			Network: name, DeviceInfo: pciInfo(fmt.Sprintf("0000:%02x:00.%d", 0x65+i/8, i%8))})
	}
	return newVMI(specs...), snap
}

func BenchmarkBuild64Interfaces(b *testing.B) { benchmarkBuild(b, 64) }

// BenchmarkBuild shows Build is linear in the number of interfaces.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("interfaces=%d", n), func(b *testing.B) { benchmarkBuild(b, n) })
	}
}

func benchmarkBuild(b *testing.B, n int) {
	vmi, snap := dualStackFixture(n)
	got, err := model.Build(vmi, snap, opts())
	require.NoError(b, err)
	require.Len(b, got, n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := model.Build(vmi, snap, opts()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBuild_64Interfaces_AllComplete(t *testing.T) {
	vmi, snap := dualStackFixture(64)
	got, err := model.Build(vmi, snap, opts())
	require.NoError(t, err)
	require.Len(t, got, 64)
	for _, bi := range got {
		require.Len(t, bi.Addresses, 2)
		require.Equal(t, model.IPv4, model.FamilyOf(bi.Addresses[0].Addr()))
		require.NotEmpty(t, bi.HostPCIAddress)
	}
	require.Empty(t, model.MissingForCloudInit(vmi, snap, opts()))
	require.Empty(t, model.MissingForDomain(vmi, snap, opts(), nil))
}
