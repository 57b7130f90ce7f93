// Package manifests holds the tests that keep manifests/ honest: every document decodes strictly into
// the real API types, every kustomization builds, and the admission policies' CEL compiles and gives
// the intended verdict on sample objects, evaluated with the apiserver's own policy libraries.
// It is a separate module so that kustomize and apiserver never enter the sidecar's dependencies.
// It must never need a cluster; `go test ./...` in this directory runs it.
package manifests
