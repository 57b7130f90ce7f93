package cluster

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/e2e"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/harness"
	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/kube"
)

// test/e2e's suite, the one `make e2e` runs on kind, on this cluster through a kubeconfig of the host: KubeVirt
// renders the launcher pod with our image as the binding's sidecar, the admission policies refuse and mount
// what they must, virt-launcher runs our hooks, then the VF stand-in's, builds the ISO from our answer and
// starts the domain, and virt-handler reports the interface.
func TestE2E_TheSuiteOnThisCluster(t *testing.T) {
	e := needNode(t)
	kubeconfig, err := e.node.HostKubeconfig()
	require.NoError(t, err, "cluster: the host's kubeconfig")
	e2e.Run(t, e2e.Target{
		Kubeconfig: kubeconfig,
		Kubectl:    e.node.KubectlBinary(),
		Fixtures:   filepath.Join(harness.RepoRoot(), "test", "cluster", "testdata", "e2e"),
		Namespace:  "sriov-udn-e2e",
		VM:         "vm-e2e",
		Checks: []e2e.Check{{
			Name: "the VF stand-in accepted our hostdev and swapped it for its NIC",
			Run: func(t *testing.T, k kube.Kubectl, pod *corev1.Pod) {
				var standIn string
				for _, c := range pod.Spec.Containers {
					if c.Image == VFStandInImage {
						standIn = c.Name
					}
				}
				require.NotEmpty(t, standIn, "KubeVirt: the launcher pod runs the VF stand-in")
				logs, err := k.Run(context.Background(), nil, "-n", pod.Namespace, "logs", pod.Name, "-c", standIn)
				require.NoError(t, err)
				assert.Contains(t, string(logs), `"msg":"OnDefineDomain ok"`,
					"cluster (VF stand-in): its OnDefineDomain checked our hostdev; log:\n%s", logs)
			},
		}},
	})
}
