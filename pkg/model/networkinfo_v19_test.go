package model_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// KubeVirt v1.9.0 writes "mtu" beside "mac" into each kubevirt.io/network-info entry (its
// pkg/network/downwardapi/networkinfo.go copies both from network-status). These tests pin which
// source wins, what a disagreement reports, and that v1.8 input (no mtu) and absent sources still work.

func infoMACMTU(mac string, mtu int) *downwardapi.NetworkInfo {
	return &downwardapi.NetworkInfo{Interfaces: []downwardapi.NetworkInfoInterface{{Network: "a", Mac: mac, Mtu: mtu}}}
}

func statusMACMTU(mac string, mtu int) []downwardapi.NetworkStatus {
	s := st("a", "ns1/sriov-a")
	s.Mac, s.Mtu = mac, mtu
	return []downwardapi.NetworkStatus{s}
}

func TestBuild_MTUPrecedence_NetworkStatusThenDeviceInfoFileThenAnnotation(t *testing.T) {
	tests := []struct {
		name string
		snap *downwardapi.Snapshot
		want int
	}{
		{"all three: network-status wins", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("", 1500), DeviceInfo: infoMACMTU("", 9000), NetworkInfo: infoMACMTU("", 1400)}, 1500},
		{"device-info only (stock v1.9): the file's", &downwardapi.Snapshot{DeviceInfo: infoMACMTU("", 9000)}, 9000},
		{"network-status without mtu: the file's", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("", 0), DeviceInfo: infoMACMTU("", 9000), NetworkInfo: infoMACMTU("", 1400)}, 9000},
		{"file entry without mtu: the annotation's", &downwardapi.Snapshot{DeviceInfo: infoMACMTU("", 0), NetworkInfo: infoMACMTU("", 1400)}, 1400},
		{"v1.8 network-info (no mtu) and no network-status: unknown", &downwardapi.Snapshot{DeviceInfo: infoMACMTU("02:00:00:00:00:03", 0)}, 0},
		{"no source at all: unknown", &downwardapi.Snapshot{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := model.Build(newVMI(bound("a", "sriov-a")), tc.snap, opts())
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tc.want, got[0].MTU)
		})
	}
}

func TestBuild_MACFromDeviceInfoFile_BeforeAnnotation_AfterNetworkStatus(t *testing.T) {
	snap := &downwardapi.Snapshot{DeviceInfo: infoMACMTU("02:00:00:00:00:0f", 0), NetworkInfo: infoMACMTU("02:00:00:00:00:0a", 0)}
	got, err := model.Build(newVMI(bound("a", "sriov-a")), snap, opts())
	require.NoError(t, err)
	assert.Equal(t, "02:00:00:00:00:0f", got[0].MAC.String())
	assert.Equal(t, model.MACFromNetworkInfo, got[0].MACSource)

	snap.NetworkStatus = statusMACMTU("02:00:00:00:00:05", 0)
	got, err = model.Build(newVMI(bound("a", "sriov-a")), snap, opts())
	require.NoError(t, err)
	assert.Equal(t, "02:00:00:00:00:05", got[0].MAC.String())
	assert.Equal(t, model.MACFromNetworkStatus, got[0].MACSource)
}

func TestBuild_BadNetworkInfoMTU_ErrorNamesSourceAndField(t *testing.T) {
	tests := []struct {
		name string
		snap *downwardapi.Snapshot
		want []string
	}{
		{"file", &downwardapi.Snapshot{DeviceInfo: infoMACMTU("", 67)}, []string{model.SourceDeviceInfoFile, "interfaces[].mtu", "MTU 67 out of range 68-65535", `"a"`}},
		{"annotation", &downwardapi.Snapshot{NetworkInfo: infoMACMTU("", 20)}, []string{downwardapi.NetworkInfoAnnotation, "interfaces[].mtu", "MTU 20"}},
		// A bad value is an error even where a higher source wins: input we cannot trust is not skipped.
		{"behind a good network-status mtu", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("", 1500), NetworkInfo: infoMACMTU("", 1)},
			[]string{downwardapi.NetworkInfoAnnotation, "interfaces[].mtu"}},
		{"network-status", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("", 40)}, []string{downwardapi.NetworkStatusAnnotation, "mtu", "MTU 40"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := model.Build(newVMI(bound("a", "sriov-a")), tc.snap, opts())
			require.Error(t, err)
			var ie *model.InputError
			assert.ErrorAs(t, err, &ie)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestNetworkInfoMismatches_ReportsDisagreementWithNetworkStatus(t *testing.T) {
	tests := []struct {
		name string
		snap *downwardapi.Snapshot
		want []model.NetworkInfoMismatch
	}{
		{"agree: nothing", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("02:00:00:00:00:02", 1500), DeviceInfo: infoMACMTU("02:00:00:00:00:02", 1500)}, nil},
		{"mtu differs (file)", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("02:00:00:00:00:02", 1500), DeviceInfo: infoMACMTU("02:00:00:00:00:02", 9000)},
			[]model.NetworkInfoMismatch{{Interface: "a", Network: "a", Field: "mtu", Source: model.SourceDeviceInfoFile}}},
		{"mac and mtu differ (annotation)", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("02:00:00:00:00:02", 1500), NetworkInfo: infoMACMTU("02:00:00:00:00:03", 1400)},
			[]model.NetworkInfoMismatch{
				{Interface: "a", Network: "a", Field: "mac", Source: downwardapi.NetworkInfoAnnotation},
				{Interface: "a", Network: "a", Field: "mtu", Source: downwardapi.NetworkInfoAnnotation}}},
		{"v1.8 network-info without mtu: no mtu comparison", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("02:00:00:00:00:02", 1500), DeviceInfo: infoMACMTU("02:00:00:00:00:02", 0)}, nil},
		{"network-status without mtu: nothing to compare", &downwardapi.Snapshot{NetworkStatus: statusMACMTU("", 0), DeviceInfo: infoMACMTU("02:00:00:00:00:03", 9000)}, nil},
		{"no network-status (device-info only): nothing to compare", &downwardapi.Snapshot{DeviceInfo: infoMACMTU("02:00:00:00:00:03", 9000)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.NetworkInfoMismatches(newVMI(bound("a", "sriov-a")), tc.snap, opts())
			assert.Equal(t, tc.want, got)
			ifaces, err := model.Build(newVMI(bound("a", "sriov-a")), tc.snap, opts())
			require.NoError(t, err)
			if len(tc.snap.NetworkStatus) > 0 && tc.snap.NetworkStatus[0].Mtu != 0 {
				assert.Equal(t, tc.snap.NetworkStatus[0].Mtu, ifaces[0].MTU, "network-status's MTU is used")
			}
		})
	}
}

func TestMACMismatches_WithoutNetworkStatus_ComparesTheVMIMACWithNetworkInfo(t *testing.T) {
	spec := bound("a", "sriov-a")
	spec.mac = "02:00:00:00:00:01"
	vmi := newVMI(spec)

	got := model.MACMismatches(vmi, &downwardapi.Snapshot{DeviceInfo: infoMACMTU("02:00:00:00:00:03", 0)}, opts())
	require.Len(t, got, 1)
	assert.Equal(t, model.SourceDeviceInfoFile, got[0].ReportedBy)
	assert.Equal(t, "02:00:00:00:00:01", got[0].VMI.String())
	assert.Zero(t, got[0].NetworkStatus)

	got = model.MACMismatches(vmi, &downwardapi.Snapshot{NetworkStatus: statusMACMTU("02:00:00:00:00:02", 0), DeviceInfo: infoMACMTU("02:00:00:00:00:01", 0)}, opts())
	require.Len(t, got, 1, "network-status is the one compared when present")
	assert.Equal(t, downwardapi.NetworkStatusAnnotation, got[0].ReportedBy)
	assert.Equal(t, "02:00:00:00:00:02", got[0].NetworkStatus.String())

	assert.Empty(t, model.MACMismatches(vmi, &downwardapi.Snapshot{DeviceInfo: infoMACMTU("02:00:00:00:00:01", 0)}, opts()), "same MAC")
	assert.Empty(t, model.MACMismatches(vmi, &downwardapi.Snapshot{DeviceInfo: infoMACMTU("", 1500)}, opts()), "no MAC reported")
}
