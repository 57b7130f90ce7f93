// Package plugin tests the sidecar's Plugin API domain hook (VEP-190) the way virt-launcher v1.9.0 calls
// it: KubeVirt's own ApplyDomainHooks (pkg/virt-launcher/virtwrap/plugins) and DomainHookService client,
// against the built binary, beside the hook protocol's Manager, with our Plugin manifest's condition
// evaluated by KubeVirt's CEL evaluator; and the hazard any Plugin CR is on v1.9.0 for other tenants' VMIs
// with KubeVirt's own PCI hostdevs (kubevirt/kubevirt#18861, hazard_test.go). Its own Go module, pinned to
// KubeVirt v1.9.0: v1.8 has no Plugin API, and the test module's matrix base (v1.8.4) could not tidy an
// import of it.
package plugin
