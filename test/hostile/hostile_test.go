package hostile

import (
	"encoding/xml"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/client-go/log"
	"kubevirt.io/kubevirt/pkg/hooks"
	"kubevirt.io/kubevirt/pkg/virt-launcher/virtwrap/api"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

var sidecarBin string

func TestMain(m *testing.M) {
	log.Log.SetIOWriter(os.Stderr)
	os.Exit(harness.Main(m, &sidecarBin))
}

// Each category of hostile peer against a fresh built sidecar whose data is ready: it stays up, its peak RSS
// stays under the documented memory limit, and afterwards it serves the calls virt-launcher makes, through
// KubeVirt's own hook Manager.
func TestHostilePeer_StaysUpUnderTheLimit_ThenServesTheHookManager(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	for i, a := range Attacks() {
		t.Run(a.Name, func(t *testing.T) {
			proc, socket := startReadySidecar(t, fmt.Sprintf("hostile-%d", i))
			o, err := Run(a, socket, proc.Pid())
			t.Logf("%s: server %s; peak RSS %d KiB (%d at ready), attack %v", a.Name, o.Server, o.PeakRSSKiB, o.ReadyKiB, o.Duration.Round(time.Millisecond))
			require.NoError(t, err)
			require.True(t, o.Alive, "the sidecar died")
			assert.LessOrEqual(t, o.PeakRSSKiB, int64(bench.PeakRSSLimitKiB), "peak RSS past the documented limit's share")
			assert.NotContains(t, proc.Logs(), "panic")

			mgr := hooks.GetManager()
			require.NoError(t, mgr.Collect(1, 10*time.Second), "the hook Manager collects the sidecar after the attack")
			vmi := bench.VMI(bench.Ifaces(1, bench.BaseNAD))
			data, err := bench.CloudInitData(vmi)
			require.NoError(t, err)
			out, err := mgr.PreCloudInitIso(vmi, data)
			require.NoError(t, err, "PreCloudInitIso through the Manager after the attack")
			assert.Contains(t, out.NetworkData, bench.Ifaces(1, bench.BaseNAD)[0].MAC, "our network config is in the answer")
			domXML, err := bench.DomainXML()
			require.NoError(t, err)
			var dom api.DomainSpec
			require.NoError(t, xml.Unmarshal(domXML, &dom))
			got, err := mgr.OnDefineDomain(&dom, vmi)
			require.NoError(t, err, "OnDefineDomain through the Manager after the attack")
			assert.Contains(t, got, "ua-sriov-", "our hostdev is in the domain")
		})
	}
}

// startReadySidecar starts the built binary as hook-sidecar-<suffix>, with pod-info and device-info ready for
// one bound interface (bench fixtures).
func startReadySidecar(t *testing.T, suffix string) (*harness.Process, string) {
	t.Helper()
	p := harness.TestPod(t, suffix)
	ifaces := bench.Ifaces(1, bench.BaseNAD)
	ann, err := bench.Annotations(ifaces, 0)
	require.NoError(t, err)
	require.NoError(t, p.WritePodInfo(map[string]string{"app": "hostile"}, ann))
	netInfo, err := bench.NetworkInfoJSON(ifaces)
	require.NoError(t, err)
	require.NoError(t, p.WriteDeviceInfo(netInfo))
	return p.Start(t, sidecarBin), p.Socket()
}
