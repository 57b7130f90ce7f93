// Package e2e is the end-to-end suite, one for any cluster: Run takes a Target (an admin kubeconfig this host
// reaches, kubectl, and fixtures that fit the cluster's networks) and checks, through kubectl and the cluster's
// own objects, what an operator's cluster with the binding registered must do for a VM that uses it: the
// admission policies, our sidecar in the launcher pod KubeVirt rendered, its hook calls, the cloud-init disk
// KubeVirt built from our answer, and vmi.status.interfaces.
//
// Two targets run it. `make e2e` (build tag e2e, e2e_test.go) makes a kind cluster with Multus and KubeVirt's
// release, or takes E2E_KUBECONFIG's cluster as it is, with the fixtures of testdata/. `make test-cluster`
// (test/cluster, in `make test`) runs it on the registry-free cluster with that cluster's fixtures. The suite
// and its ISO reader are untagged and unit-tested.
package e2e
