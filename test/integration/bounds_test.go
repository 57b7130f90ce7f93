package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// The largest legal inputs against the built binary: 1 MiB of user networkData in every format (hostile within
// the limits, and past them), 1 MiB of Secret user data in each worst case (bench.SecretUserDataCases), 64 bound
// NICs, 256 KiB of annotations, and a domain that fills a 4 MiB gRPC message. Legal inputs are merged, the others
// rejected, and the process's peak RSS leaves the documented memory limit 15% headroom (bench.LegalPeakRSSKiB).
// The largest request of all (both Secrets full of bytes JSON escapes to six, 24 MiB) is received and refused,
// naming its fields, its size and the limit, under the same bound. (Before the input limits a 454 KB v2 document
// alone took RSS to 103 MB.)
func TestSidecar_LargestLegalInputs_PeakRSSUnderTheLimit(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	l := startBoundSidecar(t, "itest-largest")
	ifaces := bench.Ifaces(bench.LargestNICs, bench.BaseNAD)
	ann, err := bench.Annotations(ifaces, bench.LargestAnnotations)
	require.NoError(t, err)
	require.NoError(t, l.WritePodInfo(map[string]string{"app": "largest"}, ann))
	netInfo, err := bench.NetworkInfoJSON(ifaces)
	require.NoError(t, err)
	require.NoError(t, l.WriteDeviceInfo(netInfo))

	res, err := bench.MeasureLargest(l.Socket(), l.proc.Pid())
	for _, in := range res.Inputs {
		t.Logf("%-48s %8d bytes legal=%-5v accepted=%-5v %v peak %d KiB %.80s", in.Name, in.Bytes, in.Legal, in.Accepted, in.Duration, in.PeakAfterKiB, in.Error)
	}
	require.NoError(t, err)
	t.Logf("peak RSS: %d KiB at ready, %d KiB before and %d KiB after OnDefineDomain (domain %d bytes)", res.ReadyPeakKiB, res.BeforeDomainKiB, res.PeakRSSKiB, res.DomainBytes)
	assert.Less(t, res.PeakRSSKiB, int64(bench.LegalPeakRSSKiB))
	lr := res.LargestRequest
	t.Logf("largest request (%s, %d bytes before escaping): accepted=%v in %v, peak %d KiB: %s", lr.Name, lr.Bytes, lr.Accepted, lr.Duration, lr.PeakAfterKiB, lr.Error)
	assert.False(t, lr.Accepted, "refused before decoding: it would cost two and a half times its size")
	assert.Less(t, lr.PeakAfterKiB, int64(bench.LegalPeakRSSKiB))
}
