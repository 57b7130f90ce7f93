package grpcwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// conn is one HTTP/2 connection. Its reader goroutine (serve) owns the receive side: frames, header
// decoding, request assembly. Handlers run on goroutines of their own and write their answers through
// the write side (wmu); the flow-control state they wait on is under mu.
type conn struct {
	srv *Server
	nc  net.Conn
	br  *bufio.Reader

	// ctx ends when the connection closes: every stream's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	// Reader goroutine only.
	hdec         *hpack.Decoder
	scratch      []byte      // a frame payload other than DATA (at most defaultMaxFrameSize)
	block        []byte      // the header block being assembled from HEADERS and CONTINUATION
	blockHdr     frameHeader // the HEADERS frame that opened block; Type 0 when none is open
	blockOpen    bool
	lastStreamID uint32 // the highest stream the client opened
	connUnacked  uint32 // DATA bytes received on the connection not yet returned by WINDOW_UPDATE

	// Write side: one frame at a time.
	wmu  sync.Mutex
	bw   *bufio.Writer
	henc *hpack.Encoder
	hbuf bytes.Buffer
	wbuf []byte
	// prefaceSent: the server's SETTINGS went out, so other frames may follow (RFC 9113 section 3.4).
	prefaceSent bool
	// maxFrame is the largest frame payload the client accepts (its SETTINGS_MAX_FRAME_SIZE).
	maxFrame atomic.Uint32

	mu         sync.Mutex
	cond       *sync.Cond // broadcast when a send window grows, a stream ends, or the connection closes
	streams    map[uint32]*stream
	sendWindow int64 // the connection's send window
	initWindow int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window
	maxID      uint32
	active     int // streams holding a MaxConcurrentStreams slot (stream.slot)
	goingAway  bool
	goAwayID   uint32
	closed     bool
}

// stream is one call.
type stream struct {
	id     uint32
	method string
	ctx    context.Context
	cancel context.CancelFunc

	// Reader goroutine only.
	prefix   [5]byte // the gRPC message prefix: compressed flag, big-endian length
	prefixN  int
	size     int    // the message's length, from the prefix
	msg      []byte // the message so far: grown as it arrives (grow), never past size
	msgN     int
	ended    bool    // END_STREAM received: the request is complete
	answered bool    // the reader answered it already (refused): what else arrives is dropped
	failure  *Status // a malformed request, answered when it ends
	unacked  uint32  // DATA bytes received on the stream not yet returned by WINDOW_UPDATE

	// Under conn.mu.
	sendWindow int64
	done       bool // answered completely, or reset
	slot       bool // holds one of MaxConcurrentStreams: from admission until the handler returns
	running    bool // its handler has started and not yet returned
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		srv: s, nc: nc, ctx: ctx, cancel: cancel,
		br:         bufio.NewReaderSize(nc, 32<<10),
		bw:         bufio.NewWriterSize(nc, 32<<10),
		hdec:       hpack.NewDecoder(4096, nil),
		scratch:    make([]byte, defaultMaxFrameSize),
		streams:    map[uint32]*stream{},
		sendWindow: defaultWindow,
		initWindow: defaultWindow,
	}
	c.hdec.SetMaxStringLength(maxHeaderList)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.cond = sync.NewCond(&c.mu)
	c.maxFrame.Store(defaultMaxFrameSize)
	return c
}

// serve runs the connection's reader until the connection ends.
func (c *conn) serve() {
	defer c.srv.removeConn(c)
	defer c.close()
	err := c.handshake()
	for err == nil {
		err = c.readFrame()
	}
	var ce connError
	if errors.As(err, &ce) {
		c.writeGoAway(c.lastStreamID, ce.code, ce.reason)
	}
}

// handshake sends the server's SETTINGS and a connection WINDOW_UPDATE, then reads the client preface
// and its SETTINGS within the handshake timeout.
func (c *conn) handshake() error {
	if err := c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout)); err != nil {
		return err
	}
	var settings []byte
	for _, s := range [][2]uint32{
		{settingMaxConcurrentStreams, c.srv.cfg.MaxConcurrentStreams},
		{settingInitialWindowSize, recvWindow},
		{settingMaxHeaderListSize, maxHeaderList},
	} {
		settings = binary.BigEndian.AppendUint16(settings, uint16(s[0]))
		settings = binary.BigEndian.AppendUint32(settings, s[1])
	}
	if err := c.writePreface(settings); err != nil {
		return err
	}
	preface := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(c.br, preface); err != nil {
		return err
	}
	if string(preface) != clientPreface {
		return connErrorf(errProtocol, "the client preface is missing")
	}
	h, err := readFrameHeader(c.br, c.scratch)
	if err != nil {
		return err
	}
	if h.Type != frameSettings || h.has(flagAck) {
		return connErrorf(errProtocol, "the client's first frame is %s, not SETTINGS", h.Type)
	}
	if err := c.handleFrame(h); err != nil {
		return err
	}
	return c.nc.SetReadDeadline(time.Time{})
}

// readFrame reads and handles one frame.
func (c *conn) readFrame() error {
	h, err := readFrameHeader(c.br, c.scratch)
	if err != nil {
		return err
	}
	return c.handleFrame(h)
}

func (c *conn) handleFrame(h frameHeader) error {
	if h.Length > defaultMaxFrameSize {
		return connErrorf(errFrameSize, "%s frame of %d bytes, over the %d this server accepts", h.Type, h.Length, defaultMaxFrameSize)
	}
	if c.blockOpen && h.Type != frameContinuation {
		return connErrorf(errProtocol, "%s frame inside the header block of stream %d", h.Type, c.blockHdr.StreamID)
	}
	if h.Type == frameData {
		return c.onData(h)
	}
	p := c.scratch[:h.Length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return err
	}
	switch h.Type {
	case frameHeaders:
		return c.onHeaders(h, p)
	case frameContinuation:
		return c.onContinuation(h, p)
	case framePriority:
		if h.Length != 5 {
			return connErrorf(errFrameSize, "PRIORITY frame of %d bytes", h.Length)
		}
		return nil
	case frameRSTStream:
		return c.onRSTStream(h, p)
	case frameSettings:
		return c.onSettings(h, p)
	case framePushPromise:
		return connErrorf(errProtocol, "PUSH_PROMISE from a client")
	case framePing:
		if h.Length != 8 {
			return connErrorf(errFrameSize, "PING frame of %d bytes", h.Length)
		}
		if h.StreamID != 0 {
			return connErrorf(errProtocol, "PING frame on stream %d", h.StreamID)
		}
		if h.has(flagAck) {
			return nil
		}
		return c.writeFrame(framePing, flagAck, 0, p)
	case frameGoAway:
		// The client opens no more streams; those it has run to the end.
		if h.StreamID != 0 {
			return connErrorf(errProtocol, "GOAWAY frame on stream %d", h.StreamID)
		}
		return nil
	case frameWindowUpdate:
		return c.onWindowUpdate(h, p)
	}
	return nil // unknown frame types are ignored (RFC 9113 section 4.1)
}

func (c *conn) onSettings(h frameHeader, p []byte) error {
	if h.StreamID != 0 {
		return connErrorf(errProtocol, "SETTINGS frame on stream %d", h.StreamID)
	}
	if h.has(flagAck) {
		if len(p) != 0 {
			return connErrorf(errFrameSize, "SETTINGS ACK with %d bytes", len(p))
		}
		return nil
	}
	if len(p)%6 != 0 {
		return connErrorf(errFrameSize, "SETTINGS frame of %d bytes", len(p))
	}
	for ; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case settingHeaderTableSize:
			c.wmu.Lock()
			c.henc.SetMaxDynamicTableSizeLimit(v)
			c.wmu.Unlock()
		case settingEnablePush:
			if v > 1 {
				return connErrorf(errProtocol, "SETTINGS_ENABLE_PUSH %d", v)
			}
		case settingInitialWindowSize:
			if v > maxWindow {
				return connErrorf(errFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE %d", v)
			}
			c.mu.Lock()
			delta := int64(v) - c.initWindow
			c.initWindow = int64(v)
			overflow := false
			for _, st := range c.streams {
				st.sendWindow += delta
				overflow = overflow || st.sendWindow > maxWindow
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			if overflow {
				return connErrorf(errFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE %d takes a stream's window past 2^31-1", v)
			}
		case settingMaxFrameSize:
			if v < defaultMaxFrameSize || v > maxAllowedFrameSize {
				return connErrorf(errProtocol, "SETTINGS_MAX_FRAME_SIZE %d", v)
			}
			c.maxFrame.Store(v)
		}
	}
	return c.writeFrame(frameSettings, flagAck, 0, nil)
}

func (c *conn) onWindowUpdate(h frameHeader, p []byte) error {
	if len(p) != 4 {
		return connErrorf(errFrameSize, "WINDOW_UPDATE frame of %d bytes", len(p))
	}
	inc := int64(binary.BigEndian.Uint32(p) & maxWindow)
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.StreamID == 0 {
		if inc == 0 {
			return connErrorf(errProtocol, "connection WINDOW_UPDATE of 0")
		}
		if c.sendWindow += inc; c.sendWindow > maxWindow {
			return connErrorf(errFlowControl, "connection window past 2^31-1")
		}
		c.cond.Broadcast()
		return nil
	}
	if h.StreamID > c.lastStreamID {
		return connErrorf(errProtocol, "WINDOW_UPDATE on idle stream %d", h.StreamID)
	}
	st, ok := c.streams[h.StreamID]
	if !ok {
		return nil // a stream already answered or reset
	}
	if inc == 0 || st.sendWindow+inc > maxWindow {
		code := errFlowControl
		if inc == 0 {
			code = errProtocol
		}
		c.mu.Unlock()
		c.reset(st, code)
		c.mu.Lock()
		return nil
	}
	st.sendWindow += inc
	c.cond.Broadcast()
	return nil
}

func (c *conn) onRSTStream(h frameHeader, p []byte) error {
	if len(p) != 4 {
		return connErrorf(errFrameSize, "RST_STREAM frame of %d bytes", len(p))
	}
	if h.StreamID == 0 || h.StreamID > c.lastStreamID {
		return connErrorf(errProtocol, "RST_STREAM on idle stream %d", h.StreamID)
	}
	if st := c.lookup(h.StreamID); st != nil {
		c.finish(st)
	}
	return nil
}

func (c *conn) lookup(id uint32) *stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

func (c *conn) onHeaders(h frameHeader, p []byte) error {
	if h.StreamID == 0 {
		return connErrorf(errProtocol, "HEADERS frame on stream 0")
	}
	if h.has(flagPadded) {
		if len(p) == 0 || int(p[0]) > len(p)-1 {
			return connErrorf(errProtocol, "HEADERS frame padding longer than the frame")
		}
		p = p[1 : len(p)-int(p[0])]
	}
	if h.has(flagPriority) {
		if len(p) < 5 {
			return connErrorf(errProtocol, "HEADERS frame too short for its priority")
		}
		p = p[5:]
	}
	c.block = append(c.block[:0], p...)
	c.blockHdr, c.blockOpen = h, true
	if h.has(flagEndHeaders) {
		return c.endHeaderBlock()
	}
	return nil
}

func (c *conn) onContinuation(h frameHeader, p []byte) error {
	if !c.blockOpen || h.StreamID != c.blockHdr.StreamID {
		return connErrorf(errProtocol, "CONTINUATION frame on stream %d outside a header block", h.StreamID)
	}
	if len(c.block)+len(p) > maxHeaderBlock {
		return connErrorf(errEnhanceYourCalm, "header block of stream %d over %d bytes", h.StreamID, maxHeaderBlock)
	}
	c.block = append(c.block, p...)
	if h.has(flagEndHeaders) {
		return c.endHeaderBlock()
	}
	return nil
}

// request is what a call's headers say.
type request struct {
	method, path, contentType, encoding, timeout string
	size                                         uint32
}

func (c *conn) endHeaderBlock() error {
	h := c.blockHdr
	c.blockOpen = false
	fields, err := c.hdec.DecodeFull(c.block)
	if cap(c.block) > 4<<10 {
		c.block = nil // a large block's buffer is not kept for the connection's life
	}
	if err != nil {
		return connErrorf(errCompression, "header block of stream %d: %v", h.StreamID, err)
	}
	if st := c.lookup(h.StreamID); st != nil {
		if st.ended {
			// The request already ended: the stream is half-closed (remote) (RFC 9113 section 5.1).
			c.reset(st, errStreamClosed)
			return nil
		}
		// Trailers: they end the request, and gRPC clients send none of their own.
		if !h.has(flagEndStream) {
			return connErrorf(errProtocol, "second HEADERS frame without END_STREAM on stream %d", h.StreamID)
		}
		return c.endRequest(st)
	}
	if h.StreamID%2 == 0 || h.StreamID <= c.lastStreamID {
		return connErrorf(errProtocol, "HEADERS frame opening stream %d after stream %d", h.StreamID, c.lastStreamID)
	}
	c.lastStreamID = h.StreamID

	var req request
	for _, f := range fields {
		req.size += f.Size()
		switch f.Name {
		case ":method":
			req.method = f.Value
		case ":path":
			req.path = f.Value
		case "content-type":
			req.contentType = f.Value
		case "grpc-encoding":
			req.encoding = f.Value
		case "grpc-timeout":
			req.timeout = f.Value
		}
	}

	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil
	case c.goingAway && h.StreamID > c.goAwayID, c.active >= int(c.srv.cfg.MaxConcurrentStreams):
		c.mu.Unlock()
		return c.writeRST(h.StreamID, errRefusedStream)
	}
	st := &stream{id: h.StreamID, method: req.path, sendWindow: c.initWindow, slot: true}
	c.streams[st.id] = st
	c.maxID = st.id
	c.active++
	c.mu.Unlock()

	var (
		timeout    time.Duration
		timeoutErr error
	)
	if req.timeout != "" {
		timeout, timeoutErr = parseTimeout(req.timeout)
	}
	if req.timeout != "" && timeoutErr == nil {
		st.ctx, st.cancel = context.WithTimeout(c.ctx, timeout)
	} else {
		st.ctx, st.cancel = context.WithCancel(c.ctx)
	}

	switch {
	case req.size > maxHeaderList:
		st.failure = &Status{Code: Internal, Message: fmt.Sprintf("grpcwire: request headers of %d bytes, over %d", req.size, maxHeaderList)}
	case req.method != "POST":
		st.failure = &Status{Code: Unimplemented, Message: fmt.Sprintf("grpcwire: HTTP method %q, gRPC uses POST", req.method)}
	case !isGRPCContentType(req.contentType):
		st.failure = &Status{Code: Unimplemented, Message: fmt.Sprintf("grpcwire: content-type %q is not gRPC's", req.contentType)}
	case req.encoding != "" && req.encoding != "identity":
		st.failure = &Status{Code: Unimplemented, Message: fmt.Sprintf("grpcwire: grpc-encoding %q is not supported, only identity", req.encoding)}
	case timeoutErr != nil:
		st.failure = &Status{Code: Internal, Message: timeoutErr.Error()}
	}
	if st.failure != nil {
		// Answered now; the client may still be sending the message, which is dropped.
		st.ended = h.has(flagEndStream)
		return c.refuse(st, st.failure)
	}
	if h.has(flagEndStream) {
		return c.endRequest(st)
	}
	return nil
}

// isGRPCContentType reports whether ct is application/grpc, optionally with a +subtype or parameters.
func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// onData reads a DATA frame's payload straight into its stream's message buffer.
func (c *conn) onData(h frameHeader) error {
	if h.StreamID == 0 {
		return connErrorf(errProtocol, "DATA frame on stream 0")
	}
	n, pad := int(h.Length), 0
	if h.has(flagPadded) {
		if n == 0 {
			return connErrorf(errProtocol, "padded DATA frame without its pad length")
		}
		b, err := c.br.ReadByte()
		if err != nil {
			return err
		}
		pad, n = int(b), n-1
		if pad > n {
			return connErrorf(errProtocol, "DATA frame padding longer than the frame")
		}
		n -= pad
	}
	if h.StreamID > c.lastStreamID {
		return connErrorf(errProtocol, "DATA frame on idle stream %d", h.StreamID)
	}
	st := c.lookup(h.StreamID)
	switch {
	case st == nil || st.answered:
		// A stream already answered or reset: the bytes still count against the connection's window.
		if err := c.discard(n); err != nil {
			return err
		}
	case st.ended:
		if err := c.discard(n); err != nil {
			return err
		}
		if err := c.writeRST(st.id, errStreamClosed); err != nil {
			return err
		}
		c.finish(st)
		st = nil
	default:
		if err := c.readMessage(st, n); err != nil {
			return err
		}
	}
	if err := c.discard(pad); err != nil {
		return err
	}
	if err := c.ack(st, h.Length); err != nil {
		return err
	}
	if st != nil && !st.answered && h.has(flagEndStream) {
		return c.endRequest(st)
	}
	return nil
}

// ack returns n received bytes to the client's send windows (the connection's, and the stream's while
// it still receives) once a quarter of a window is used.
func (c *conn) ack(st *stream, n uint32) error {
	c.connUnacked += n
	if c.connUnacked >= recvWindow/4 {
		if err := c.writeWindowUpdate(0, c.connUnacked); err != nil {
			return err
		}
		c.connUnacked = 0
	}
	if st == nil || st.answered {
		return nil
	}
	st.unacked += n
	if st.unacked >= recvWindow/4 {
		if err := c.writeWindowUpdate(st.id, st.unacked); err != nil {
			return err
		}
		st.unacked = 0
	}
	return nil
}

// readMessage reads n bytes of st's request: the 5-byte prefix, then the message into a buffer of the
// length the prefix announced.
func (c *conn) readMessage(st *stream, n int) error {
	for n > 0 {
		switch {
		case st.prefixN < len(st.prefix):
			k := min(len(st.prefix)-st.prefixN, n)
			if _, err := io.ReadFull(c.br, st.prefix[st.prefixN:st.prefixN+k]); err != nil {
				return err
			}
			st.prefixN += k
			n -= k
			if st.prefixN < len(st.prefix) {
				continue
			}
			size := binary.BigEndian.Uint32(st.prefix[1:])
			switch {
			case st.prefix[0] != 0:
				st.failure = &Status{Code: Internal, Message: "grpcwire: compressed request message without a grpc-encoding"}
			case uint64(size) > uint64(c.srv.cfg.MaxRecvMsgSize):
				st.failure = &Status{Code: ResourceExhausted, Message: fmt.Sprintf(
					"grpc: received message larger than max (%d vs. %d)", size, c.srv.cfg.MaxRecvMsgSize)}
			default:
				st.size = int(size)
				st.msg = make([]byte, min(st.size, firstMsgBuffer))
				continue
			}
			if err := c.discard(n); err != nil {
				return err
			}
			return c.refuse(st, st.failure)
		case st.msgN < st.size:
			if st.msgN == len(st.msg) {
				st.grow()
			}
			k := min(len(st.msg)-st.msgN, n)
			if _, err := io.ReadFull(c.br, st.msg[st.msgN:st.msgN+k]); err != nil {
				return err
			}
			st.msgN += k
			n -= k
		default:
			st.failure = &Status{Code: Internal, Message: "grpcwire: more than one request message in a unary call"}
			st.msg = nil
			if err := c.discard(n); err != nil {
				return err
			}
			return c.refuse(st, st.failure)
		}
	}
	return nil
}

func (c *conn) discard(n int) error {
	_, err := c.br.Discard(n)
	return err
}

// endRequest runs the handler for a complete request, or answers an incomplete one.
func (c *conn) endRequest(st *stream) error {
	st.ended = true
	if st.answered {
		return nil
	}
	if st.failure == nil && (st.prefixN < len(st.prefix) || st.msgN < st.size) {
		st.failure = &Status{Code: Internal, Message: fmt.Sprintf(
			"grpcwire: the request ended after %d of its message's %d bytes", st.prefixN+st.msgN, len(st.prefix)+st.size)}
	}
	if st.failure != nil {
		return c.refuse(st, st.failure)
	}
	msg := st.msg[:st.size:st.size]
	st.msg = nil
	c.mu.Lock()
	st.running = true
	c.mu.Unlock()
	go c.run(st, msg)
	return nil
}

// grow gives the message the room for more of it: twice as much, and the whole announced size once an
// eighth of it has arrived. A client pins at most eight times what it sent (a length prefix alone pins
// 64 KiB), and the largest message costs 1.25 times its size at the last step instead of twice.
func (st *stream) grow() {
	next := 2 * len(st.msg)
	if 8*len(st.msg) >= st.size {
		next = st.size
	}
	msg := make([]byte, min(next, st.size))
	copy(msg, st.msg[:st.msgN])
	st.msg = msg
}

// refuse answers st with a status from the reader, before any handler ran, and stops the client's upload.
func (c *conn) refuse(st *stream, s *Status) error {
	st.answered = true
	st.msg = nil
	if f := c.srv.cfg.OnRefused; f != nil {
		f(st.method, s)
	}
	err := c.writeHeaderBlock(st.id, true, trailersOnly(s)...)
	if err == nil && !st.ended {
		// The answer is complete; the rest of the request is not wanted (RFC 9113 section 8.1).
		err = c.writeRST(st.id, errNo)
	}
	c.finish(st)
	return err
}

// run calls the handler and writes its answer. The stream's slot is given back before the frame that
// ends the stream: a grpc-go client frees its own slot when it reads that frame, and sends a queued call
// at once, which must not find the slot still taken.
func (c *conn) run(st *stream, msg []byte) {
	defer c.finish(st)
	resp, err := c.call(st, msg)
	if err != nil {
		c.handlerDone(st)
		_ = c.writeHeaders(st, true, trailersOnly(FromError(err))...)
		return
	}
	err = c.writeHeaders(st, false, hpack.HeaderField{Name: ":status", Value: "200"},
		hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	if err == nil {
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[1:], uint32(len(resp)))
		err = c.writeData(st, prefix[:], resp)
	}
	c.handlerDone(st)
	if err == nil {
		_ = c.writeHeaders(st, true, hpack.HeaderField{Name: "grpc-status", Value: "0"})
	}
}

// handlerDone gives back st's slot once its handler has returned.
func (c *conn) handlerDone(st *stream) {
	c.mu.Lock()
	st.running = false
	c.releaseSlot(st)
	c.mu.Unlock()
}

// releaseSlot gives back st's MaxConcurrentStreams slot; c.mu is held.
func (c *conn) releaseSlot(st *stream) {
	if st.slot {
		st.slot = false
		c.active--
	}
}

// call runs the handler; a panic that escapes it becomes an Internal status.
func (c *conn) call(st *stream, msg []byte) (resp []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, Errorf(Internal, "grpcwire: handler of %s panicked: %v", st.method, r)
		}
	}()
	resp, err = c.srv.cfg.Handler(st.ctx, st.method, msg)
	if err == nil && len(resp) > maxWindow {
		err = Errorf(ResourceExhausted, "grpcwire: response of %d bytes", len(resp))
	}
	return resp, err
}

// finish ends st: its context, its place among the streams, and the connection if it was the last call
// a graceful stop waited for.
func (c *conn) finish(st *stream) {
	c.mu.Lock()
	st.done = true
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	if !st.running {
		c.releaseSlot(st) // a reset stream's handler keeps the slot until it returns (handlerDone)
	}
	last := c.goingAway && len(c.streams) == 0
	c.cond.Broadcast()
	c.mu.Unlock()
	if st.cancel != nil {
		st.cancel()
	}
	if last {
		c.close()
	}
}

// reset answers st with RST_STREAM and ends it.
func (c *conn) reset(st *stream, code errCode) {
	_ = c.writeRST(st.id, code)
	c.finish(st)
}

// goAway starts the graceful stop: no stream after the last accepted one; the connection closes when
// its calls are answered.
func (c *conn) goAway() {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goingAway, c.goAwayID = true, c.maxID
	idle := len(c.streams) == 0
	c.mu.Unlock()
	c.writeGoAway(c.goAwayID, errNo, "")
	if idle {
		c.close()
	}
}

// close ends the connection: every stream's context, every writer waiting for a window, the socket.
func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, st := range c.streams {
		st.done = true
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	c.cancel()
	_ = c.nc.Close()
}

// errStreamDone is what a writer gets when its stream was reset or its connection closed.
var errStreamDone = errors.New("grpcwire: stream reset or connection closed")

// writeData sends parts as DATA frames on st as the client's windows allow.
func (c *conn) writeData(st *stream, parts ...[]byte) error {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	for total > 0 {
		c.mu.Lock()
		for !st.done && (st.sendWindow <= 0 || c.sendWindow <= 0) {
			c.cond.Wait()
		}
		if st.done {
			c.mu.Unlock()
			return errStreamDone
		}
		n := int(min(int64(total), int64(c.maxFrame.Load()), st.sendWindow, c.sendWindow))
		st.sendWindow -= int64(n)
		c.sendWindow -= int64(n)
		c.mu.Unlock()

		frame := make([][]byte, 0, 2)
		for k := n; k > 0; {
			take := min(k, len(parts[0]))
			frame = append(frame, parts[0][:take])
			parts[0] = parts[0][take:]
			if len(parts[0]) == 0 {
				parts = parts[1:]
			}
			k -= take
		}
		if err := c.writeFrame(frameData, 0, st.id, frame...); err != nil {
			return err
		}
		total -= n
	}
	return nil
}

// trailersOnly is gRPC's Trailers-Only response: the status alone.
func trailersOnly(s *Status) []hpack.HeaderField {
	fields := []hpack.HeaderField{
		{Name: ":status", Value: "200"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "grpc-status", Value: strconv.FormatUint(uint64(s.Code), 10)},
	}
	if s.Message != "" {
		fields = append(fields, hpack.HeaderField{Name: "grpc-message", Value: encodeMessage(s.Message)})
	}
	return fields
}

// writeHeaders writes a header block on st unless it was reset.
func (c *conn) writeHeaders(st *stream, endStream bool, fields ...hpack.HeaderField) error {
	c.mu.Lock()
	done := st.done
	c.mu.Unlock()
	if done {
		return errStreamDone
	}
	return c.writeHeaderBlock(st.id, endStream, fields...)
}

// writeHeaderBlock encodes fields and writes them as one HEADERS frame and as many CONTINUATION frames
// as the client's frame size needs. Encoding and writing happen under one lock: HPACK's table is shared
// by every stream of the connection, in the order the blocks go out.
func (c *conn) writeHeaderBlock(id uint32, endStream bool, fields ...hpack.HeaderField) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.hbuf.Reset()
	for _, f := range fields {
		if err := c.henc.WriteField(f); err != nil {
			return err
		}
	}
	block := c.hbuf.Bytes()
	limit := int(c.maxFrame.Load())
	t, flags := frameHeaders, uint8(0)
	if endStream {
		flags |= flagEndStream
	}
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), limit)
		f := flags
		if n == len(block) {
			f |= flagEndHeaders
		}
		if err := c.writeLocked(t, f, id, block[:n]); err != nil {
			return err
		}
		block = block[n:]
		t, flags = frameContinuation, 0
	}
	return c.flushLocked()
}

func (c *conn) writeRST(id uint32, code errCode) error {
	return c.writeFrame(frameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, uint32(code)))
}

func (c *conn) writeWindowUpdate(id, inc uint32) error {
	return c.writeFrame(frameWindowUpdate, 0, id, binary.BigEndian.AppendUint32(nil, inc))
}

// writeGoAway sends GOAWAY, unless the server's SETTINGS have not gone out yet: nothing may precede them,
// and a connection without them has no stream to tell about.
func (c *conn) writeGoAway(lastID uint32, code errCode, reason string) {
	p := binary.BigEndian.AppendUint32(nil, lastID)
	p = binary.BigEndian.AppendUint32(p, uint32(code))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.prefaceSent {
		return
	}
	if c.writeLocked(frameGoAway, 0, 0, p, []byte(reason)) == nil {
		_ = c.flushLocked()
	}
}

// writePreface sends the server's SETTINGS and a connection WINDOW_UPDATE that raises the client's
// send window to recvWindow.
func (c *conn) writePreface(settings []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writeLocked(frameSettings, 0, 0, settings); err != nil {
		return err
	}
	if err := c.writeLocked(frameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, recvWindow-defaultWindow)); err != nil {
		return err
	}
	c.prefaceSent = true
	return c.flushLocked()
}

// writeFrame writes one frame and flushes it.
func (c *conn) writeFrame(t frameType, flags uint8, id uint32, payload ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writeLocked(t, flags, id, payload...); err != nil {
		return err
	}
	return c.flushLocked()
}

func (c *conn) writeLocked(t frameType, flags uint8, id uint32, payload ...[]byte) error {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return c.writeFailed(err)
	}
	c.wbuf = appendFrameHeader(c.wbuf[:0], frameHeader{Length: uint32(n), Type: t, Flags: flags, StreamID: id})
	if _, err := c.bw.Write(c.wbuf); err != nil {
		return c.writeFailed(err)
	}
	for _, p := range payload {
		if _, err := c.bw.Write(p); err != nil {
			return c.writeFailed(err)
		}
	}
	return nil
}

func (c *conn) flushLocked() error {
	if err := c.bw.Flush(); err != nil {
		return c.writeFailed(err)
	}
	return nil
}

// writeFailed closes the connection after a failed write: the peer cannot follow the stream of frames.
// No caller writes while holding mu, so close (which takes mu) is safe here under wmu.
func (c *conn) writeFailed(err error) error {
	c.close()
	return err
}
