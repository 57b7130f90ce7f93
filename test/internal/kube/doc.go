// Package kube runs kubectl for the suites that drive a cluster: test/e2e's suite on any kubeconfig (kind, or
// an operator's cluster), and test/cluster's registry-free cluster, whose kubectl runs inside the node's
// network namespace (Wrap).
package kube
