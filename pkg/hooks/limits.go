package hooks

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The sizes a hook call can have (docs/design.md "Transport limits"). virt-launcher marshals the VMI and the
// CloudInitData with encoding/json (pkg/hooks/manager.go preCloudInitIsoDataToJSON), which writes '<', '>',
// '&' and every control byte but \b \f \n \r \t as a 6-byte \u00XX, and sends the user data and networkData
// twice: in CloudInitData and in the legacy CloudInitNoCloudSource.
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

	// MaxRequestBytes is the largest request virt-launcher can send: user data and networkData from one
	// Secret each, every byte escaped, twice, plus the VMI (27.1 MiB). The sidecar receives any request up
	// to this size, so that one it will not decode gets an answer that says why (DecodeBytes), not gRPC's
	// bare size error.
	MaxRequestBytes = 2*jsonEscapeFactor*secretDataBytes + 2*jsonEscapeFactor*secretDataBytes + vmiJSONBytes + envelopeBytes

	// CloudInitDecodeBytes is the largest PreCloudInitIso request the sidecar decodes, and DecodeBytes the
	// largest of any other. Protobuf decodes from one contiguous copy of the received frames and copies each
	// bytes field out of it, so a request costs about three times its size while it is decoded, two and a half
	// for PreCloudInitIso, whose legacy copy is skipped (codec.go): 81 MiB at MaxRequestBytes, past KubeVirt's
	// own 64M sidecar limit. 13 MiB holds 1 MiB of Secret user data of any text, HTML included, sent twice
	// with every '<', '>' and '&' escaped to 6 bytes (12 MiB), with a small networkData and VMI; 8 MiB holds
	// OnDefineDomain's largest (a domain that fills virt-launcher's 4 MiB answer limit, and the VMI).
	CloudInitDecodeBytes = 13 << 20
	DecodeBytes          = 8 << 20

	// MaxAnswerBytes is what virt-launcher receives: gRPC's default client limit (4 MiB), which
	// pkg/util/net/grpc DialSocketWithTimeout keeps. An answer past it fails the VM in virt-launcher with
	// gRPC's message only, so the sidecar refuses it itself, naming the sizes.
	MaxAnswerBytes = 4 << 20
	// answerFramingBytes is the protobuf framing of an answer's fields (tags and lengths).
	answerFramingBytes = 32
)

// Limits are the transport's bounds against a peer that may be hostile (any process of the pod can reach
// the socket). Their sum is what the sidecar's memory limit must carry: docs/design.md "Transport limits".
type Limits struct {
	// RequestBytes is gRPC's receive limit (MaxRecvMsgSize); CloudInitDecodeBytes and DecodeBytes the
	// codec's (codec.go).
	RequestBytes, CloudInitDecodeBytes, DecodeBytes int
	// BudgetBytes bounds, process-wide, the bytes requests hold (budget.go): each stream reserves
	// StreamReserve() from it before any of its data is read, then what its request and answer hold.
	BudgetBytes int64
	// ReceiveTimeout cancels a stream whose request has not arrived whole this long after its headers:
	// virt-launcher sends a request at once, so this only ends a peer that holds a budget share.
	ReceiveTimeout time.Duration
	// Connections is the most connections open at once in the process, both sockets together (Budget);
	// Handshake, ConnectionIdle and ConnectionAge (+ ConnectionAgeGrace) end silent, idle and stuck ones.
	Connections                                                  int
	Handshake, ConnectionIdle, ConnectionAge, ConnectionAgeGrace time.Duration
	// StreamsPerConnection is MaxConcurrentStreams: virt-launcher opens one connection per call
	// (pkg/hooks/manager.go, virtwrap/plugins/sidecar.go: DialSocketWithTimeout, then Close). One is also the
	// bound on answers a peer that never opens its window leaves queued: grpc-go ends a stream (its context)
	// when it queues the trailers, not when it writes them, so such an answer is past the budget; the stream
	// counts against this limit until its trailers are written, so each connection holds at most one.
	StreamsPerConnection uint32
	// HeaderListBytes is MaxHeaderListSize: virt-launcher's headers are about 200 bytes; x/net's framer
	// stops decoding a header block (HPACK, CONTINUATION) once it passes this.
	HeaderListBytes uint32
	// PingMinInterval is the keepalive enforcement's MinTime (PINGs are refused without a call open).
	PingMinInterval time.Duration
	// Window is the static HTTP/2 flow-control window (no BDP estimation).
	Window int32
}

// DefaultLimits are the sidecar's transport limits.
func DefaultLimits() Limits {
	l := Limits{
		RequestBytes:         MaxRequestBytes,
		CloudInitDecodeBytes: CloudInitDecodeBytes,
		DecodeBytes:          DecodeBytes,
		ReceiveTimeout:       10 * time.Second,
		Connections:          3, // a hook call, a Plugin API call, one spare

		Handshake:            2 * time.Second,
		ConnectionIdle:       30 * time.Second,
		ConnectionAge:        90 * time.Second, // a call lasts at most virt-launcher's 1 min deadline
		ConnectionAgeGrace:   15 * time.Second,
		StreamsPerConnection: 1,
		HeaderListBytes:      16 << 10,
		PingMinInterval:      5 * time.Minute, // grpc-go's default, made explicit
		Window:               1 << 20,
	}
	// One request at its costliest, and 1 MiB of requests being served beside it (an Info while a hook
	// waits for data; virt-launcher itself calls one hook at a time).
	l.BudgetBytes = l.StreamReserve() + 1<<20
	return l
}

// StreamReserve is what a stream may cost before its request has been decoded, and so what it reserves: the
// most gRPC receives (a request refused by the codec is held whole first), or the most the codec decodes,
// with its copies (CloudInitDecodeBytes).
func (l Limits) StreamReserve() int64 {
	return max(int64(l.RequestBytes), int64(l.CloudInitDecodeBytes)*5/2, int64(l.DecodeBytes)*3)
}

// answerTooLarge is the error for an answer virt-launcher could not receive.
func answerTooLarge(hook, what string, size int) error {
	return status.Error(codes.ResourceExhausted, fmt.Sprintf("%s: the answer's %s is %d bytes, over the %d bytes virt-launcher "+
		"receives (gRPC's default client limit, kept by KubeVirt's pkg/util/net/grpc): the VM could not start with it", hook, what, size, MaxAnswerBytes))
}
