// Package admission owns the pod-info mutation of a virt-launcher pod, as a JSON patch: the downwardAPI volume
// sriov-udn-podinfo (the pod's labels and annotations) and its read-only mount into each sriov-udn-binding
// hook sidecar, exactly what manifests/podinfo-policy's MutatingAdmissionPolicy adds, for servers that do not
// serve that API. PodInfoPatch decides (pure); Review answers an AdmissionReview; Handler serves it over HTTP.
// It never panics on bad input, never dumps a pod or its annotations into a log, and changes nothing else.
// Called by cmd/sidecar's `webhook` subcommand only.
package admission
