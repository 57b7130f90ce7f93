// Package ovn is OVN-Kubernetes' k8s.ovn.org/pod-networks annotation as OVN-K writes it, in plain JSON types
// (the sidecar's own parser, pkg/downwardapi, keeps its mirror unexported and returns validated netip values,
// and a test's expectation must not come from the code it tests). test/cmd/cluster-cni writes it for the
// cluster; test/guest and test/bench write it for their pods; test/e2e, test/cluster, test/guest and
// test/ifacecache read it or build their fixtures with it.
package ovn
