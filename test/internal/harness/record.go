package harness

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// RecordDirEnv names the directory where RecordDomain leaves every domain the built sidecar returned
// through KubeVirt's hook Manager, for test/libvirt to run libvirt's own checks on (`make test` sets it
// for test-integration and test-guest, then runs test-libvirt).
const RecordDirEnv = "SRIOV_UDN_DOMAIN_RECORD_DIR"

// The two files of one recorded OnDefineDomain call: what the Manager sent and what the sidecar returned.
const (
	RecordedInputSuffix  = ".in.xml"
	RecordedOutputSuffix = ".out.xml"
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// RecordDomain writes one OnDefineDomain call (input: the domain as the Manager marshals it, output: the
// sidecar's result) under $SRIOV_UDN_DOMAIN_RECORD_DIR, named after the test and KubeVirt version; it does
// nothing when that is unset.
func RecordDomain(t testing.TB, input, output []byte) {
	t.Helper()
	recordDomain(t, "", input, output)
}

// RecordDomainSpec records one OnDefineDomain call given the spec the test passed to the Manager, marshalled
// as the Manager marshals it (pkg/hooks/manager.go), and the sidecar's result; label tells apart the calls of
// one test ("" for a single call).
func RecordDomainSpec(t testing.TB, label string, spec any, output string) {
	t.Helper()
	if os.Getenv(RecordDirEnv) == "" {
		return
	}
	input, err := xml.MarshalIndent(spec, "", "\t")
	require.NoError(t, err, "marshal the domain sent to OnDefineDomain")
	recordDomain(t, label, input, []byte(output))
}

func recordDomain(t testing.TB, label string, input, output []byte) {
	t.Helper()
	dir := os.Getenv(RecordDirEnv)
	if dir == "" {
		return
	}
	name := t.Name()
	if label != "" {
		name += "_" + label
	}
	name = unsafeName.ReplaceAllString(name, "_")
	if v := os.Getenv("KUBEVIRT_VERSION"); v != "" {
		name = v + "_" + name
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+RecordedInputSuffix), input, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+RecordedOutputSuffix), output, 0o644))
}
