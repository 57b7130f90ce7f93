// Package admission owns the pod-info mutation of a virt-launcher pod, as a JSON patch: the downwardAPI volume
// sriov-udn-podinfo (the pod's labels and annotations) and its read-only mount into each sriov-udn-binding
// hook sidecar, exactly what manifests/podinfo-policy's MutatingAdmissionPolicy adds, for servers that do not
// serve that API. Rule.PodInfoPatch decides (pure); Rule.Review answers an AdmissionReview; Handler serves it.
// It decodes only the fields it reads, into types of its own: the sidecar binary links no Kubernetes API
// package (Makefile check-build); its tests hold those types to k8s.io/api's wire format. It never panics on
// bad input, never logs a pod or its annotations, and changes nothing else. Called by cmd/sidecar `webhook`.
package admission
