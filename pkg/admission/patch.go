package admission

import (
	"strconv"
	"strings"
)

// The values manifests/podinfo-policy/mutating-policy.yaml sets, and the rule it finds our containers by.
const (
	// VolumeName is the downwardAPI volume's name; patches/kubevirt and manifests/policy know it by this name.
	VolumeName = "sriov-udn-podinfo"
	// MountPath is cmd/sidecar's default --pod-info-dir.
	MountPath = "/var/run/kubevirt-private/downwardapi/podinfo"
	// SidecarPrefix: KubeVirt names binding sidecars hook-sidecar-<n> (pkg/virt-controller/services/template.go).
	SidecarPrefix = "hook-sidecar-"
	// ImageMarker is what our image's name contains by default (docs/configuration.md, "Renaming the image or
	// the binding"); `webhook --image-substring` changes it.
	ImageMarker = "sriov-udn-binding"
)

// PatchOp is one RFC 6902 operation. The patch only ever adds.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Rule finds our sidecars as the MutatingAdmissionPolicy's ourContainers variable does: a container named
// SidecarPrefix<n> whose image name contains ImageSubstring (ImageMarker unless the image was renamed).
type Rule struct {
	ImageSubstring string
}

// IsOurs reports whether c is one of our hook sidecars.
func (r Rule) IsOurs(c *Container) bool {
	return strings.HasPrefix(c.Name, SidecarPrefix) && strings.Contains(c.Image, r.ImageSubstring)
}

// RunsOurSidecar is the policy's matchCondition: pod has at least one of our sidecars.
func (r Rule) RunsOurSidecar(pod *Pod) bool {
	for i := range pod.Spec.Containers {
		if r.IsOurs(&pod.Spec.Containers[i]) {
			return true
		}
	}
	return false
}

// podInfoVolume is the volume as the policy writes it; the API server defaults the rest (defaultMode,
// fieldRef.apiVersion) as it does for the policy's.
func podInfoVolume() downwardAPIVolume {
	return downwardAPIVolume{Name: VolumeName, DownwardAPI: downwardAPISource{Items: []downwardAPIFile{
		{Path: "labels", FieldRef: objectFieldPath{FieldPath: "metadata.labels"}},
		{Path: "annotations", FieldRef: objectFieldPath{FieldPath: "metadata.annotations"}},
	}}}
}

func podInfoMount() VolumeMount {
	return VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true}
}

// PodInfoPatch returns the operations that give pod the pod-info volume and mount it into each of our
// sidecars; nil when there is nothing to add (not ours, or already done: a reinvocation adds nothing).
//
// As the policy: the volume is appended unless a volume of its name exists (whatever its source; the
// podinfo-volume policy keeps VMIs from defining one), and the mount is appended to each of our containers
// that has no mount at MountPath yet (the API server refuses two mounts at one path).
func (r Rule) PodInfoPatch(pod *Pod) []PatchOp {
	if !r.RunsOurSidecar(pod) {
		return nil
	}
	var ops []PatchOp
	if !hasVolume(pod, VolumeName) {
		if len(pod.Spec.Volumes) == 0 { // absent, null or []: "add" sets the member whichever
			ops = append(ops, PatchOp{Op: "add", Path: "/spec/volumes", Value: []downwardAPIVolume{podInfoVolume()}})
		} else {
			ops = append(ops, PatchOp{Op: "add", Path: "/spec/volumes/-", Value: podInfoVolume()})
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !r.IsOurs(c) || hasMountAt(c, MountPath) {
			continue
		}
		path := "/spec/containers/" + strconv.Itoa(i) + "/volumeMounts"
		if len(c.VolumeMounts) == 0 {
			ops = append(ops, PatchOp{Op: "add", Path: path, Value: []VolumeMount{podInfoMount()}})
		} else {
			ops = append(ops, PatchOp{Op: "add", Path: path + "/-", Value: podInfoMount()})
		}
	}
	return ops
}

func hasVolume(pod *Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasMountAt(c *Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}
