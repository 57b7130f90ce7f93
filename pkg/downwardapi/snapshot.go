package downwardapi

import (
	"fmt"
	"maps"
)

// podInfoData is the parsed content of the pod-info volume (or of a pod's metadata for render).
type podInfoData struct {
	present       bool
	labels        map[string]string
	annotations   map[string]string
	networkInfo   *NetworkInfo
	networkStatus []NetworkStatus
	podNetworks   PodNetworks
	problems      []error
}

// parseAnnotations parses the annotations the sidecar understands. origin says where the map came from
// ("pod-info file /…/annotations", "pod annotations") and prefixes every problem, so an error names the
// file, the annotation key (inside FieldError.Source), the network and the field.
func (p *podInfoData) parseAnnotations(origin string) {
	if v, ok := p.annotations[NetworkInfoAnnotation]; ok {
		info, err := ParseNetworkInfo(NetworkInfoAnnotation, []byte(v))
		if err != nil {
			p.problems = append(p.problems, fmt.Errorf("%s: %w", origin, err))
		}
		p.networkInfo = info
	}
	if v, ok := p.annotations[NetworkStatusAnnotation]; ok {
		st, err := ParseNetworkStatus([]byte(v))
		if err != nil {
			p.problems = append(p.problems, fmt.Errorf("%s: %w", origin, err))
		}
		p.networkStatus = st
	}
	if v, ok := p.annotations[PodNetworksAnnotation]; ok {
		pn, err := ParsePodNetworks([]byte(v))
		if err != nil {
			p.problems = append(p.problems, fmt.Errorf("%s: %w", origin, err))
		}
		p.podNetworks = pn
	}
}

// SnapshotFromMaps builds a Snapshot (PodInfo=true, Generation 0, no device-info file) as if the
// labels and annotations had been read from the pod-info volume. The render subcommand uses it on
// `kubectl get pod -o json` output. The maps are copied.
func SnapshotFromMaps(labels, annotations map[string]string) *Snapshot {
	p := podInfoData{present: true, labels: maps.Clone(labels), annotations: maps.Clone(annotations)}
	if p.labels == nil {
		p.labels = map[string]string{}
	}
	if p.annotations == nil {
		p.annotations = map[string]string{}
	}
	p.parseAnnotations("pod annotations")
	return buildSnapshot(0, nil, nil, p)
}

// buildSnapshot assembles an immutable Snapshot from the parsed parts of each source.
func buildSnapshot(gen uint64, device *NetworkInfo, deviceProblem error, pod podInfoData) *Snapshot {
	s := &Snapshot{
		Generation:    gen,
		DeviceInfo:    device,
		PodInfo:       pod.present,
		Labels:        pod.labels,
		Annotations:   pod.annotations,
		NetworkInfo:   pod.networkInfo,
		NetworkStatus: pod.networkStatus,
		PodNetworks:   pod.podNetworks,
	}
	if deviceProblem != nil {
		s.Problems = append(s.Problems, deviceProblem)
	}
	s.Problems = append(s.Problems, pod.problems...)
	return s
}
