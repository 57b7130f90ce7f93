package cluster

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Makefile builds test-controlplane's kube-apiserver and the docs' kubectl with the cluster's own command
// line: otherwise Go's build cache serves neither build to the other, and a cold run compiles Kubernetes twice.
func TestMakefile_BuildsKubernetesAsTheCluster(t *testing.T) {
	for _, tc := range []struct{ target, binary, out string }{
		{"test-controlplane", "kube-apiserver", "/tmp/x/kube-apiserver"},
		{"test-controlplane", "kubectl", "/tmp/x/kubectl"},
		{"test-docs", "kubectl", "/tmp/x/kubectl"},
	} {
		t.Run(tc.target+"/"+tc.binary, func(t *testing.T) {
			out, err := exec.Command("make", "-s", "-n", "-C", "../..", tc.target,
				"KUBE_APISERVER=/tmp/x/kube-apiserver", "KUBECTL=/tmp/x/kubectl").CombinedOutput()
			require.NoError(t, err, "make -n %s: %s", tc.target, out)
			args := kubernetesBuildArgs(tc.binary, tc.out)
			for i, a := range args {
				if strings.Contains(a, " ") {
					args[i] = "'" + a + "'"
				}
			}
			want := "cd test/cluster/kubernetes && CGO_ENABLED=0 go " + strings.Join(args, " ")
			require.True(t, strings.Contains(string(out), want), "make %s does not build %s as test/cluster does: no %q in its recipe",
				tc.target, tc.binary, want)
		})
	}
}
