package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// patchTypeJSONPatch is admission/v1's PatchTypeJSONPatch.
const patchTypeJSONPatch = "JSONPatch"

// Outcome is what one review decided: the fields of its log line, never the pod itself.
type Outcome struct {
	UID       string
	Operation string
	Namespace string
	// Pod is the pod's name, or its generateName when the server has not named it yet (virt-controller
	// creates launcher pods with generateName virt-launcher-<vmi>-).
	Pod     string
	Ops     int    // patch operations returned
	Allowed bool   // false: Reason says why
	Reason  string // why the request was refused
}

// errNotAReview is wrapped by every error Review returns: body is no AdmissionReview request it can answer.
var errNotAReview = errors.New("not an admission.k8s.io/v1 AdmissionReview request")

// Review answers the AdmissionReview in body. An error means there is no request to answer (no UID): the
// caller refuses it at the HTTP level. A request it cannot mutate (not a v1 Pod, an object that does not
// decode) is answered allowed=false, with a message naming what is wrong: failurePolicy Fail would refuse the
// pod anyway, and this way the user reads the reason.
func (r Rule) Review(body []byte) (*AdmissionReview, Outcome, error) {
	var in AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Outcome{}, fmt.Errorf("%w: decode: %w", errNotAReview, err)
	}
	if got := in.APIVersion + "/" + in.Kind; got != "admission.k8s.io/v1/AdmissionReview" {
		return nil, Outcome{}, fmt.Errorf("%w: apiVersion/kind is %q", errNotAReview, got)
	}
	if in.Request == nil || in.Request.UID == "" {
		return nil, Outcome{}, fmt.Errorf("%w: no request or no request uid", errNotAReview)
	}
	req := in.Request
	out := Outcome{UID: req.UID, Operation: req.Operation, Namespace: req.Namespace, Pod: req.Name}
	resp := &AdmissionResponse{UID: req.UID}
	review := &AdmissionReview{APIVersion: in.APIVersion, Kind: in.Kind, Response: resp}

	pod, err := decodePod(req)
	if err != nil {
		out.Reason = err.Error()
		resp.Result = &Status{
			Status:  "Failure",
			Code:    http.StatusBadRequest,
			Reason:  "BadRequest",
			Message: "sriov-udn-binding pod-info webhook: " + out.Reason,
		}
		return review, out, nil
	}
	if out.Pod == "" {
		out.Pod = pod.Metadata.Name
		if out.Pod == "" {
			out.Pod = pod.Metadata.GenerateName
		}
	}
	resp.Allowed, out.Allowed = true, true
	if req.Operation != "CREATE" {
		return review, out, nil // the volumes of a pod never change after its creation
	}
	ops := r.PodInfoPatch(pod)
	if len(ops) == 0 {
		return review, out, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil { // plain values of our own: cannot happen, but never answer with half a patch
		return nil, out, fmt.Errorf("encode the patch for request %s: %w", req.UID, err)
	}
	pt := patchTypeJSONPatch
	resp.Patch, resp.PatchType, out.Ops = patch, &pt, len(ops)
	return review, out, nil
}

// decodePod returns the request's object as a v1 Pod, or an error naming what it is instead.
func decodePod(req *AdmissionRequest) (*Pod, error) {
	if k := req.Kind; k.Group != "" || k.Version != "v1" || k.Kind != "Pod" {
		return nil, fmt.Errorf("request %s is for kind %q (group %q, version %q): this webhook mutates v1 Pods only",
			req.UID, k.Kind, k.Group, k.Version)
	}
	if req.SubResource != "" {
		return nil, fmt.Errorf("request %s is for subresource %q: this webhook mutates pods on creation only", req.UID, req.SubResource)
	}
	if len(req.Object) == 0 || string(req.Object) == "null" {
		return nil, fmt.Errorf("request %s (%s) has no object", req.UID, req.Operation)
	}
	var pod Pod
	if err := json.Unmarshal(req.Object, &pod); err != nil {
		return nil, fmt.Errorf("request %s: decode the object as a v1 Pod: %w", req.UID, err)
	}
	if pod.APIVersion != "v1" || pod.Kind != "Pod" {
		return nil, fmt.Errorf("request %s: the object is apiVersion %q kind %q, not a v1 Pod", req.UID, pod.APIVersion, pod.Kind)
	}
	return &pod, nil
}
