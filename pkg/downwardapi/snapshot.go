package downwardapi

import (
	"fmt"
	"maps"
)

// parseAnnotations fills the parsed annotations from s.Annotations (an absent annotation parses as
// empty: nil, no problem). origin says where the map came from ("pod-info file /…/annotations", "pod
// annotations") and prefixes every problem, so an error names the file, the annotation key (inside
// FieldError.Source), the network and the field.
func (s *Snapshot) parseAnnotations(origin string) {
	var errs [3]error
	s.NetworkInfo, errs[0] = ParseNetworkInfo(NetworkInfoAnnotation, []byte(s.Annotations[NetworkInfoAnnotation]))
	s.NetworkStatus, errs[1] = ParseNetworkStatus([]byte(s.Annotations[NetworkStatusAnnotation]))
	s.PodNetworks, errs[2] = ParsePodNetworks([]byte(s.Annotations[PodNetworksAnnotation]))
	for _, err := range errs {
		if err != nil {
			s.Problems = append(s.Problems, fmt.Errorf("%s: %w", origin, err))
		}
	}
}

// SnapshotFromMaps builds a Snapshot (PodInfo=true, Generation 0, no device-info file) as if the
// labels and annotations had been read from the pod-info volume. The render subcommand uses it on
// `kubectl get pod -o json` output. The maps are copied.
func SnapshotFromMaps(labels, annotations map[string]string) *Snapshot {
	s := &Snapshot{PodInfo: true, Labels: maps.Clone(labels), Annotations: maps.Clone(annotations)}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.parseAnnotations("pod annotations")
	return s
}
