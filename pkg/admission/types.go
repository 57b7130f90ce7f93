package admission

import (
	"encoding/json"
	"fmt"
)

// The wire format of admission.k8s.io/v1 (k8s.io/api/admission/v1) and of the few Pod fields the decision
// reads or the patch writes (k8s.io/api/core/v1), by their JSON names. Fields not named here are not read:
// kube-apiserver has validated the object it sends. types_test.go holds these to k8s.io/api.

// AdmissionReview is the request kube-apiserver sends and the response it reads back.
type AdmissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *AdmissionRequest  `json:"request,omitempty"`
	Response   *AdmissionResponse `json:"response,omitempty"`
}

// GroupVersionKind names the kind of a request's object.
type GroupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// AdmissionRequest is the part of a request the webhook reads.
type AdmissionRequest struct {
	UID         string           `json:"uid"`
	Kind        GroupVersionKind `json:"kind"`
	SubResource string           `json:"subResource,omitempty"`
	Name        string           `json:"name,omitempty"`
	Namespace   string           `json:"namespace,omitempty"`
	Operation   string           `json:"operation"`
	Object      json.RawMessage  `json:"object,omitempty"`
}

// AdmissionResponse is the webhook's answer.
type AdmissionResponse struct {
	UID       string  `json:"uid"`
	Allowed   bool    `json:"allowed"`
	Result    *Status `json:"status,omitempty"`
	Patch     []byte  `json:"patch,omitempty"` // base64 on the wire, as k8s.io/api's []byte
	PatchType *string `json:"patchType,omitempty"`
}

// Status is the metav1.Status of a refusal.
type Status struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Code    int32  `json:"code,omitempty"`
}

// Pod is what the decision reads of a v1 Pod.
type Pod struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   PodMetadata `json:"metadata"`
	Spec       PodSpec     `json:"spec"`
}

// PodMetadata names the pod for the log.
type PodMetadata struct {
	Name         string `json:"name,omitempty"`
	GenerateName string `json:"generateName,omitempty"`
}

// PodSpec holds the lists the patch adds to.
type PodSpec struct {
	Volumes    []NamedVolume `json:"volumes,omitempty"`
	Containers []Container   `json:"containers"`
}

// NamedVolume is a volume by its name only.
type NamedVolume struct {
	Name string `json:"name"`
}

// Container is what the rule and the patch read of a container.
type Container struct {
	Name         string        `json:"name"`
	Image        string        `json:"image,omitempty"`
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
}

// VolumeMount is a container's mount (core/v1 VolumeMount, the fields the patch sets).
type VolumeMount struct {
	Name      string `json:"name"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	MountPath string `json:"mountPath"`
}

// downwardAPIVolume is the pod-info volume as the patch writes it (core/v1 Volume with a DownwardAPI source).
type downwardAPIVolume struct {
	Name        string            `json:"name"`
	DownwardAPI downwardAPISource `json:"downwardAPI"`
}

type downwardAPISource struct {
	Items []downwardAPIFile `json:"items"`
}

type downwardAPIFile struct {
	Path     string          `json:"path"`
	FieldRef objectFieldPath `json:"fieldRef"`
}

type objectFieldPath struct {
	FieldPath string `json:"fieldPath"`
}

// decodeExact decodes the JSON object data into targets by exact member name. encoding/json matches names
// case-insensitively; kube-apiserver's decoder and the patch's JSON pointers do not, so a "Spec" must not be
// read as the "spec" a patch path names (found by FuzzReview).
func decodeExact(data []byte, targets map[string]any) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return err
	}
	for name, target := range targets {
		if raw, ok := members[name]; ok {
			if err := json.Unmarshal(raw, target); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

func (p *Pod) UnmarshalJSON(data []byte) error {
	return decodeExact(data, map[string]any{"apiVersion": &p.APIVersion, "kind": &p.Kind, "metadata": &p.Metadata, "spec": &p.Spec})
}

func (m *PodMetadata) UnmarshalJSON(data []byte) error {
	return decodeExact(data, map[string]any{"name": &m.Name, "generateName": &m.GenerateName})
}

func (s *PodSpec) UnmarshalJSON(data []byte) error {
	return decodeExact(data, map[string]any{"volumes": &s.Volumes, "containers": &s.Containers})
}

func (v *NamedVolume) UnmarshalJSON(data []byte) error {
	return decodeExact(data, map[string]any{"name": &v.Name})
}

func (c *Container) UnmarshalJSON(data []byte) error {
	return decodeExact(data, map[string]any{"name": &c.Name, "image": &c.Image, "volumeMounts": &c.VolumeMounts})
}

func (m *VolumeMount) UnmarshalJSON(data []byte) error {
	return decodeExact(data, map[string]any{"name": &m.Name, "readOnly": &m.ReadOnly, "mountPath": &m.MountPath})
}
