package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kubevirt.io/kubevirt/pkg/hooks"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/bench"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
)

// User data from a Secret (up to 1 MiB; KubeVirt tells users to use one past 2048 bytes) reaches the sidecar
// JSON-encoded twice in one message, each '<', '>', '&' and control byte as 6 bytes. Each worst case goes end to
// end through KubeVirt's own hook Manager: the VM starts, the user's part is intact in the answer KubeVirt keeps
// (as KubeVirt's JSON handed it over: bytes that are not UTF-8 arrive as U+FFFD), and the sidecar's peak RSS
// leaves the documented memory limit 15% headroom (bench.LegalPeakRSSKiB). The largest such request (1 MiB of
// '<', '>' and '&', 12 MiB on the wire) is within pkg/hooks CloudInitDecodeBytes.
func TestPreCloudInitIso_SecretUserData1MiB_WorstEscapes_IntactAndUnderTheLimit(t *testing.T) {
	harness.RequireRoot(t)
	harness.LockHooksRoot(t)
	pod, vmi := harness.LoadSamples(t)
	for i, tc := range bench.SecretUserDataCases() {
		t.Run(tc.Name, func(t *testing.T) {
			l := startBoundSidecar(t, fmt.Sprintf("itest-secret%d", i))
			require.NoError(t, l.WritePodInfo(pod.Metadata.Labels, pod.Metadata.Annotations))
			mgr := hooks.GetManager()
			require.NoError(t, mgr.Collect(1, 10*time.Second))
			before, err := bench.ReadProcStats(l.proc.Pid())
			require.NoError(t, err)

			data := harness.SampleNoCloud()
			data.UserData = tc.UserData
			t0 := time.Now()
			out, err := mgr.PreCloudInitIso(vmi, data)
			took := time.Since(t0)
			require.NoError(t, err)
			after, err := bench.ReadProcStats(l.proc.Pid())
			require.NoError(t, err)
			t.Logf("%s: %d bytes, %v; peak RSS %d KiB at ready, %d KiB after", tc.Name, len(tc.UserData), took, before.HWMKiB, after.HWMKiB)

			require.NotNil(t, out)
			assert.Equal(t, "vm-sriov.tenant-a", out.NoCloudMetaData.InstanceID, "KubeVirt kept our CloudInitData, metadata included")
			assert.Contains(t, out.NetworkData, "02:00:00:aa:01:01")
			assert.Equal(t, asKubeVirtSendsIt(t, tc.UserData), firstPart(t, out.UserData), "the user's part, byte for byte")
			assert.Less(t, after.HWMKiB, int64(bench.LegalPeakRSSKiB))
		})
	}
}

// asKubeVirtSendsIt is s after the JSON round trip of virt-launcher's hook call: each byte that is not
// UTF-8 becomes U+FFFD.
func asKubeVirtSendsIt(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var out string
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// firstPart decodes the first part of a MIME multipart user data as cloud-init does (base64 or 7bit).
func firstPart(t *testing.T, userData string) string {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	require.NoError(t, err)
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	p, err := multipart.NewReader(msg.Body, params["boundary"]).NextRawPart()
	require.NoError(t, err)
	var r io.Reader = p
	if p.Header.Get("Content-Transfer-Encoding") == "base64" {
		r = base64.NewDecoder(base64.StdEncoding, newlineDropper{p})
	}
	body, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(body)
}

// newlineDropper drops line breaks, which MIME puts into base64 every 76 characters.
type newlineDropper struct{ r io.Reader }

func (n newlineDropper) Read(p []byte) (int, error) {
	c, err := n.r.Read(p)
	k := 0
	for _, b := range p[:c] {
		if b != '\n' && b != '\r' {
			p[k] = b
			k++
		}
	}
	return k, err
}
