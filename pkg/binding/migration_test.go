package binding

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/migration"
)

// asMigrationTarget returns the sample VMI as virt-launcher's prepareMigrationTarget passes it to
// OnDefineDomain: with the migration state virt-controller set at the hand-off to the target pod.
func asMigrationTarget(t *testing.T, vmiJSON []byte, annotations map[string]string) []byte {
	t.Helper()
	var vmi map[string]any
	require.NoError(t, json.Unmarshal(vmiJSON, &vmi))
	vmi["status"] = map[string]any{"migrationState": map[string]any{
		"sourceNode": "node-a", "targetNode": "node-b", "targetPod": "virt-launcher-vm-tgt", "migrationUid": "mig-1",
	}}
	if annotations != nil {
		meta := vmi["metadata"].(map[string]any)
		meta["annotations"] = annotations
	}
	out, err := json.Marshal(vmi)
	require.NoError(t, err)
	return out
}

func TestBinding_OnDefineDomain_MigrationTarget_RefusedAtOnceWithReason(t *testing.T) {
	annotations, vmi := loadSample(t)
	domainXML := []byte("<domain><devices></devices></domain>")
	tests := []struct {
		name        string
		annotations map[string]string // pod annotations (device-info)
		vmi         []byte
		wantCode    codes.Code
	}{
		{"target, device-info present", annotations, asMigrationTarget(t, vmi, nil), codes.FailedPrecondition},
		// The target's device-info may be late: the refusal must not wait for it.
		{"target, device-info missing", withoutDeviceInfo(annotations), asMigrationTarget(t, vmi, nil), codes.FailedPrecondition},
		{"target with the re-plug opt-in", annotations, asMigrationTarget(t, vmi, map[string]string{migration.ReplugAnnotation: migration.ReplugValue}), codes.OK},
		{"first start", annotations, vmi, codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBinding(t, tc.annotations, nil)
			start := time.Now()
			out, err := b.OnDefineDomain(context.Background(), tc.vmi, domainXML)
			assert.Equal(t, tc.wantCode, status.Code(err), "%v", err)
			if tc.wantCode != codes.OK {
				assert.Less(t, time.Since(start), 100*time.Millisecond, "refused before any wait")
				assert.Contains(t, err.Error(), "OnDefineDomain: live migration refused")
				assert.Contains(t, err.Error(), "sriov-l2")
				assert.Nil(t, out)
				return
			}
			assert.Contains(t, string(out), "<hostdev", "the VF is wired as on any start")
		})
	}
}
