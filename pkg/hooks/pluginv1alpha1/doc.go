// Package pluginv1alpha1 owns the wire types of KubeVirt's Plugin API domain hook (VEP-190,
// kubevirt.io/kubevirt v1.9.0 pkg/hooks/plugins/v1alpha1/api.proto): the MutateDomain messages, generated
// from our own api.proto, and the DomainHookService descriptor written by hand. It is ours rather than
// KubeVirt's generated package because that package's client.go imports kubevirt.io/api/core/v1, which
// would link the Kubernetes API machinery into the sidecar. It must never hold logic; pkg/hooks serves it.
package pluginv1alpha1
