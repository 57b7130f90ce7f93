package hooks

import (
	"fmt"
	"log/slog"
	"path"

	"github.com/sriov-udn-binding/sriov-udn-binding/pkg/hooks/grpcwire"
)

// The sizes a hook call can have (README "Limits", docs/design.md section 9; issue 30). virt-launcher
// marshals the VMI and the CloudInitData with encoding/json (pkg/hooks/manager.go
// preCloudInitIsoDataToJSON), which writes '<', '>', '&' and every control byte but \b \f \n \r \t as
// a 6-byte \u00XX, and sends the user data and networkData twice: in CloudInitData and in the legacy
// CloudInitNoCloudSource.
const (
	// secretDataBytes is the most a Secret holds (Kubernetes MaxSecretSize, keys included): KubeVirt
	// limits inline user data and networkData to 2048 bytes each (vmi-create-admitter.go
	// cloudInitUserMaxLen) and points to userDataSecretRef / networkDataSecretRef for more, one Secret each.
	secretDataBytes = 1 << 20
	// jsonEscapeFactor is the most bytes encoding/json writes for one byte of a string.
	jsonEscapeFactor = 6
	// vmiJSONBytes bounds the VMI's JSON: etcd stores objects up to 1.5 MiB (its --max-request-bytes
	// default), and what encoding/json can grow in it is bounded by the 256 KiB of annotations
	// (apimachinery TotalAnnotationSizeLimitB) and the 2 x 2048 bytes of inline cloud-init data.
	vmiJSONBytes = 3 << 20
	// envelopeBytes covers CloudInitData's other fields (metadata, devices, volume name) and framing.
	envelopeBytes = 64 << 10

	// MaxRequestBytes is the largest request the sidecar receives: user data and networkData from one
	// Secret each, every byte escaped, twice, plus the VMI. OnDefineDomain's (a domain under
	// virt-launcher's 4 MiB receive limit, plus the VMI) is smaller. 27.1 MiB.
	MaxRequestBytes = 2*jsonEscapeFactor*secretDataBytes + 2*jsonEscapeFactor*secretDataBytes + vmiJSONBytes + envelopeBytes

	// MaxAnswerBytes is what virt-launcher receives: gRPC's default client limit (4 MiB), which
	// pkg/util/net/grpc DialSocketWithTimeout keeps. An answer past it fails the VM in virt-launcher with
	// gRPC's message only, so the sidecar refuses it itself, naming the sizes.
	MaxAnswerBytes = 4 << 20
	// answerFramingBytes is the protobuf framing of an answer's fields (tags and lengths).
	answerFramingBytes = 32
)

// answerTooLarge is the error for an answer virt-launcher could not receive.
func answerTooLarge(hook, what string, size int) error {
	return grpcwire.Error(grpcwire.ResourceExhausted, fmt.Sprintf("%s: the answer's %s is %d bytes, over the %d bytes virt-launcher "+
		"receives (gRPC's default client limit, kept by KubeVirt's pkg/util/net/grpc): the VM could not start with it", hook, what, size, MaxAnswerBytes))
}

// fitAnswer drops the legacy CloudInitNoCloudSource echo when the answer would not fit with it: virt-launcher
// reads the echo only when CloudInitData has no UserData (manager.go preCloudInitIsoValidateResult), which
// ours always has. An answer whose CloudInitData alone does not fit is refused.
func fitAnswer(hook string, data, source []byte) ([]byte, error) {
	if len(data)+answerFramingBytes > MaxAnswerBytes {
		return nil, answerTooLarge(hook, "CloudInitData", len(data))
	}
	if len(data)+len(source)+answerFramingBytes > MaxAnswerBytes {
		return nil, nil
	}
	return source, nil
}

// refusedLogger logs each call the transport answered before any handler ran: larger than
// MaxRequestBytes (virt-launcher gets a status naming both sizes), or malformed. The sidecar's log says
// which hook and why.
type refusedLogger struct {
	log   *slog.Logger
	limit int
}

func (h refusedLogger) refused(method string, st *grpcwire.Status) {
	h.log.Warn("hook call refused", "hook", path.Base(method), "service", path.Dir(method),
		"limit", h.limit, "error", boundedError(st))
}
