package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/cloudinit"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
)

// stepCounts counts the real steps a Call runs.
type stepCounts struct{ derive, plan, parse int }

func countingCall(vmi *model.VirtualMachineInstance, n *stepCounts) *Call {
	c := NewCall(vmi, opts)
	real := c.steps
	c.steps = steps{
		derive: func(v *model.VirtualMachineInstance, s *downwardapi.Snapshot, o model.Options) *model.Derivation {
			n.derive++
			return real.derive(v, s, o)
		},
		plan: func(in *cloudinit.Input, ifaces []model.BoundInterface) (*cloudinit.Plans, error) {
			n.plan++
			return real.plan(in, ifaces)
		},
		parse: func(in *cloudinit.Input) (*cloudinit.UserNetwork, error) {
			n.parse++
			return real.parse(in)
		},
	}
	return c
}

// readyWait is pkg/binding's wait when the data is there: need is asked once about the current snapshot.
func readyWait(t *testing.T, snap *downwardapi.Snapshot) Wait {
	return func(_ context.Context, hook string, need Need) (*downwardapi.Snapshot, error) {
		require.Empty(t, need(snap), "%s: precondition: the data is there", hook)
		return snap, nil
	}
}

// One PreCloudInitIso builds the model once, plans the NICs once and parses the user's
// networkData once, whatever the datasource and whether the user gave networkData (before: 4 builds,
// 3 plans, 3 parses).
func TestPreCloudInitIso_OneCall_DerivesOncePlansOnceParsesOnce(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{}}]`))
	windows := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitConfigDrive":{}}]`))
	windows.Annotations = map[string]string{cloudinit.WindowsNetworkScriptAnnotation: "true"}
	for _, tc := range []struct {
		name        string
		vmi         *model.VirtualMachineInstance
		ds, network string
		wantNIC     string // a MAC the merged network config must hold
	}{
		{"noCloud, no user networkData (pod NIC added)", vmi, "noCloud", "", "02:00:00:00:00:0a"},
		{"noCloud v1", vmi, "noCloud", "version: 1\nconfig:\n- type: physical\n  name: x\n  mac_address: '02:00:00:00:01:99'\n", "02:00:00:00:01:01"},
		{"noCloud v2, user configures our NIC", vmi, "noCloud", "version: 2\nethernets:\n  x:\n    match: {macaddress: '02:00:00:00:01:01'}\n", "02:00:00:00:01:01"},
		{"configDrive with the Windows script", windows, "configDrive", `{"links":[{"id":"u","ethernet_mac_address":"02:00:00:00:01:99"}]}`, "02:00:00:00:01:01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(map[string]string{"DataSource": tc.ds, "UserData": "#cloud-config\n", "NetworkData": tc.network})
			require.NoError(t, err)
			var n stepCounts
			snap := snapOf("02:00:00:00:01:01")
			out, _, err := countingCall(tc.vmi, &n).PreCloudInitIso(context.Background(), data, readyWait(t, snap))
			require.NoError(t, err)
			assert.Contains(t, string(out), tc.wantNIC, "precondition: the merge ran")
			assert.Equal(t, stepCounts{derive: 1, plan: 1, parse: 1}, n)
		})
	}
}

// OnDefineDomain derives the model once (the need and the hostdevs read the same derivation).
func TestOnDefineDomain_OneCall_DerivesOnce(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{}}]`))
	var n stepCounts
	out, _, err := countingCall(vmi, &n).OnDefineDomain(context.Background(), []byte(RenderDomainXML), readyWait(t, snapOf("02:00:00:00:01:01")))
	require.NoError(t, err)
	assert.Contains(t, string(out), "0x65", "precondition: the hostdev was added")
	assert.Equal(t, stepCounts{derive: 1}, n)
}

// render runs both hooks' steps and the cache on one Call: still one derivation, one plan, one parse
// (before: 8 builds).
func TestReport_OneRender_DerivesOncePlansOnceParsesOnce(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{"networkData":"version: 2\nethernets: {}\n"}}]`))
	var n stepCounts
	r := countingCall(vmi, &n).Report(snapOf("02:00:00:00:01:01"))
	require.Equal(t, ResultRendered, r.Result, "%+v", r.Failure)
	require.NotEmpty(t, r.InterfaceCache, "precondition: the cache entries were derived")
	assert.Equal(t, stepCounts{derive: 1, plan: 1, parse: 1}, n)
}

// A hook that waits derives once per snapshot it is asked about, and the result comes from the last.
func TestPreCloudInitIso_Waiting_DerivesOncePerSnapshot(t *testing.T) {
	vmi := vmiOf(t, fmt.Sprintf(boundSpec, `,"volumes":[{"name":"c","cloudInitNoCloud":{}}]`))
	late := downwardapi.SnapshotFromMaps(nil, nil)
	ready := snapOf("02:00:00:00:01:01")
	wait := func(_ context.Context, _ string, need Need) (*downwardapi.Snapshot, error) {
		require.NotEmpty(t, need(late), "precondition: nothing there yet")
		require.NotEmpty(t, need(late), "asked again about the same snapshot")
		require.Empty(t, need(ready))
		return ready, nil
	}
	var n stepCounts
	_, _, err := countingCall(vmi, &n).PreCloudInitIso(context.Background(), []byte(`{"DataSource":"noCloud","UserData":"#cloud-config\n"}`), wait)
	require.NoError(t, err)
	assert.Equal(t, stepCounts{derive: 2, plan: 1, parse: 1}, n)
}
