// Package manifests holds the fast, offline checks of manifests/: every document decodes strictly into
// the real API types, values agree with each other and with the sidecar's defaults, and every
// kustomization builds. What the server does with them (the admission policies' compilation, verdicts
// and mutations) is tested against a real kube-apiserver in test/controlplane.
// It lives in the test/ module, so that kustomize never enters the sidecar's dependencies.
// It must never need a cluster; `make test-manifests` runs it once per KubeVirt version.
package manifests
