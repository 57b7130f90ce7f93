package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/binding"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/downwardapi"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/model"
	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/pipeline"
)

// staticSnapshots serves one snapshot and never waits: a need it does not meet fails at once.
type staticSnapshots struct{ snap *downwardapi.Snapshot }

func (s staticSnapshots) Snapshot() *downwardapi.Snapshot { return s.snap }

func (s staticSnapshots) Wait(_ context.Context, need func(*downwardapi.Snapshot) []downwardapi.Missing) (*downwardapi.Snapshot, error) {
	if missing := need(s.snap); len(missing) > 0 {
		return nil, &downwardapi.MissingError{Items: missing}
	}
	return s.snap, nil
}

func (s staticSnapshots) Next(ctx context.Context, _ uint64) (*downwardapi.Snapshot, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRenderAndHooks_OneAnswerOnRepeatedRuns runs render and both hooks many times on every fixture, each
// time on a freshly parsed snapshot (Go randomises map order per map and per range): every run must give
// the same report, the same hook outputs and the same errors (the pod NIC's MAC was once picked by map
// order, and PreCloudInitIso and OnDefineDomain disagreed).
func TestRenderAndHooks_OneAnswerOnRepeatedRuns(t *testing.T) {
	const runs = 12
	for name, fx := range renderFixtures(t) {
		t.Run(name, func(t *testing.T) {
			podRaw, err := os.ReadFile(fx[0])
			require.NoError(t, err)
			vmiRaw, err := os.ReadFile(fx[1])
			require.NoError(t, err)
			vmi, err := decodeVMI(vmiRaw)
			require.NoError(t, err)
			vmiJSON, err := objectJSON(vmiRaw, "VirtualMachineInstance", "spec", "")
			require.NoError(t, err)
			ciData, _, _, hasVolume, err := pipeline.VolumeCloudInitData(vmi)
			require.NoError(t, err)
			opts := model.Options{BindingName: "sriov-udn"}

			type answer struct{ Report, CloudInit, CloudInitErr, Domain, DomainErr string }
			var first *answer
			for i := range runs {
				snap, err := snapshotFromPod(podRaw)
				require.NoError(t, err)
				report, err := json.Marshal(render(vmi, snap, opts))
				require.NoError(t, err)
				b, err := binding.New(binding.Config{Options: opts, WaitTimeout: time.Second, Snapshots: staticSnapshots{snap}})
				require.NoError(t, err)
				a := answer{Report: string(report)}
				if hasVolume {
					out, err := b.PreCloudInitIso(context.Background(), vmiJSON, ciData)
					a.CloudInit, a.CloudInitErr = string(out), errText(err)
				}
				out, err := b.OnDefineDomain(context.Background(), vmiJSON, []byte(pipeline.RenderDomainXML))
				a.Domain, a.DomainErr = string(out), errText(err)
				if first == nil {
					first = &a
					continue
				}
				require.Equal(t, *first, a, "run %d differs from run 0", i)
			}
		})
	}
}

// errText is err's message without how long a hook waited: timing, not an answer.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return regexp.MustCompile(`waited [0-9.]+[a-zµ]*s`).ReplaceAllString(err.Error(), "waited (time)")
}
