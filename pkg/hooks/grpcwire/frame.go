package grpcwire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// clientPreface opens every HTTP/2 connection (RFC 9113 section 3.4).
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// frameType is an HTTP/2 frame type (RFC 9113 section 6).
type frameType uint8

const (
	frameData         frameType = 0x0
	frameHeaders      frameType = 0x1
	framePriority     frameType = 0x2
	frameRSTStream    frameType = 0x3
	frameSettings     frameType = 0x4
	framePushPromise  frameType = 0x5
	framePing         frameType = 0x6
	frameGoAway       frameType = 0x7
	frameWindowUpdate frameType = 0x8
	frameContinuation frameType = 0x9
)

var frameNames = [...]string{"DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"}

func (t frameType) String() string {
	if int(t) < len(frameNames) {
		return frameNames[t]
	}
	return fmt.Sprintf("frame type 0x%x", uint8(t))
}

// Frame flags. END_STREAM and ACK share a bit: which applies depends on the frame type.
const (
	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// errCode is an HTTP/2 error code (RFC 9113 section 7), sent in RST_STREAM and GOAWAY.
type errCode uint32

const (
	errNo              errCode = 0x0
	errProtocol        errCode = 0x1
	errInternal        errCode = 0x2
	errFlowControl     errCode = 0x3
	errStreamClosed    errCode = 0x5
	errFrameSize       errCode = 0x6
	errRefusedStream   errCode = 0x7
	errCancel          errCode = 0x8
	errCompression     errCode = 0x9
	errEnhanceYourCalm errCode = 0xb
)

// Settings identifiers (RFC 9113 section 6.5.2).
const (
	settingHeaderTableSize      = 0x1
	settingEnablePush           = 0x2
	settingMaxConcurrentStreams = 0x3
	settingInitialWindowSize    = 0x4
	settingMaxFrameSize         = 0x5
	settingMaxHeaderListSize    = 0x6
)

const (
	frameHeaderLen = 9
	// defaultMaxFrameSize is the largest frame payload either side may send until the peer's SETTINGS
	// allow more; this server never allows more (grpc-go's client sends 16 KiB DATA frames anyway).
	defaultMaxFrameSize = 1 << 14
	maxAllowedFrameSize = 1<<24 - 1
	// defaultWindow is every flow-control window's size before SETTINGS or WINDOW_UPDATE change it.
	defaultWindow = 65535
	maxWindow     = 1<<31 - 1
)

// frameHeader is the 9-byte header every frame starts with.
type frameHeader struct {
	Length   uint32
	Type     frameType
	Flags    uint8
	StreamID uint32
}

func (h frameHeader) has(flag uint8) bool { return h.Flags&flag != 0 }

// readFrameHeader reads a frame header into buf (at least frameHeaderLen bytes) and decodes it.
func readFrameHeader(r io.Reader, buf []byte) (frameHeader, error) {
	if _, err := io.ReadFull(r, buf[:frameHeaderLen]); err != nil {
		return frameHeader{}, err
	}
	return frameHeader{
		Length:   uint32(buf[0])<<16 | uint32(buf[1])<<8 | uint32(buf[2]),
		Type:     frameType(buf[3]),
		Flags:    buf[4],
		StreamID: binary.BigEndian.Uint32(buf[5:9]) & (1<<31 - 1),
	}, nil
}

// appendFrameHeader appends h's 9 bytes to dst.
func appendFrameHeader(dst []byte, h frameHeader) []byte {
	return append(dst, byte(h.Length>>16), byte(h.Length>>8), byte(h.Length), byte(h.Type), h.Flags,
		byte(h.StreamID>>24), byte(h.StreamID>>16), byte(h.StreamID>>8), byte(h.StreamID))
}

// connError ends the whole connection: a GOAWAY with code, then close.
type connError struct {
	code   errCode
	reason string
}

func (e connError) Error() string {
	return fmt.Sprintf("http2: connection error %d: %s", e.code, e.reason)
}

func connErrorf(code errCode, format string, args ...any) error {
	return connError{code: code, reason: fmt.Sprintf(format, args...)}
}
