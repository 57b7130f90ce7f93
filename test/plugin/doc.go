// Package plugin tests the sidecar's Plugin API domain hook (VEP-190) the way virt-launcher v1.9.0 calls
// it: KubeVirt's own ApplyDomainHooks (pkg/virt-launcher/virtwrap/plugins) and DomainHookService client,
// against the built binary, beside the hook protocol's Manager, with our Plugin manifest's condition
// evaluated by KubeVirt's CEL evaluator; and the hazard any Plugin CR is on v1.9.0 for other tenants' VMIs
// with KubeVirt's own PCI hostdevs (kubevirt/kubevirt#18861, hazard_test.go). It builds with KubeVirt
// v1.9.0 only (go.kubevirt-v1.9.0.mod, `make test-plugin`): v1.8 has no Plugin API, so test/go.mod (v1.8.4)
// ignores this directory.
package plugin
