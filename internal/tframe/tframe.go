// Package tframe reads, checks and writes TChannel frames: the protocol's
// frame layout, and the rules a frame must keep before tchannel-go may
// parse it.
//
// tchannel-go trusts some fields of the frames it reads. A call frame whose
// checksum type is 4 or more indexes a four-entry table with it and panics;
// a call or continuation frame with no argument chunk indexes an empty
// slice and panics. Both happen in goroutines where nothing can recover, so
// one frame from a remote peer ends the process. Check rejects every such
// frame, and every frame whose fields do not fit in it, so that a
// connection can be closed instead.
//
// A frame is a 16-byte header (size:2 type:1 reserved:1 id:4 reserved:8)
// and a payload laid out by its type:
//
//	init req/res   version:2 nh:2 (key~2 value~2){nh}
//	call req       flags:1 ttl:4 tracing:25 service~1 nh:1 (k~1 v~1){nh} csumtype:1 csum:0|4 (arg~2)+
//	call res       flags:1 code:1 tracing:25 nh:1 (k~1 v~1){nh} csumtype:1 csum:0|4 (arg~2)+
//	continue       flags:1 csumtype:1 csum:0|4 (arg~2)+
//	cancel         ttl:4 tracing:25 why~2
//	error          code:1 tracing:25 message~2
//	ping req/res   (nothing)
//	signal         nh:1 (key~1 value~1){nh}   (Sluice's own, see Signal)
//
// where x~n is a string of x's bytes preceded by its length in n bytes,
// all integers are big-endian, and bit 0x01 of flags says more fragments
// of the message follow.
package tframe

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the protocol.
const (
	// HeaderSize is the size of a frame's header.
	HeaderSize = 16
	// MaxSize is the largest frame, header included: its size field is 16
	// bits.
	MaxSize = 0xFFFF
	// TracingSize is the size of the tracing field of call, cancel and
	// error frames: span id, parent id and trace id (8 bytes each) and
	// flags (1 byte).
	TracingSize = 25
)

// Type is a frame's message type.
type Type byte

// The message types.
const (
	InitReq         Type = 0x01
	InitRes         Type = 0x02
	CallReq         Type = 0x03
	CallRes         Type = 0x04
	CallReqContinue Type = 0x13
	CallResContinue Type = 0x14
	Cancel          Type = 0xC0
	Claim           Type = 0xC1
	PingReq         Type = 0xD0
	PingRes         Type = 0xD1
	Error           Type = 0xFF
)

func (t Type) String() string {
	switch t {
	case InitReq:
		return "init req"
	case InitRes:
		return "init res"
	case CallReq:
		return "call req"
	case CallRes:
		return "call res"
	case CallReqContinue:
		return "call req continue"
	case CallResContinue:
		return "call res continue"
	case Cancel:
		return "cancel"
	case Claim:
		return "claim"
	case PingReq:
		return "ping req"
	case PingRes:
		return "ping res"
	case Error:
		return "error"
	}
	return fmt.Sprintf("type 0x%02x", byte(t))
}

// MoreFragments is the flag bit of call and continuation frames saying that
// more fragments of the message follow.
const MoreFragments = 0x01

// The checksum types, and the most a frame may name: tchannel-go indexes a
// table of four with it.
const (
	ChecksumNone     = 0
	ChecksumCRC32    = 1
	ChecksumFarmhash = 2
	ChecksumCRC32C   = 3
	maxChecksumType  = ChecksumCRC32C
)

// Header is a frame's header, without its reserved bytes.
type Header struct {
	Size uint16 // of the whole frame, header included
	Type Type
	ID   uint32
}

// ParseHeader reads the header at the start of b, which must hold at least
// HeaderSize bytes.
func ParseHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{Size: binary.BigEndian.Uint16(b), Type: Type(b[2]), ID: binary.BigEndian.Uint32(b[4:])}
}

// Frame is what Parse learns of a valid frame.
type Frame struct {
	Header
	// More is set on call and continuation frames followed by more
	// fragments of the same message.
	More bool
	// TTL is a call request's time to live, in milliseconds.
	TTL uint32
}

// ProtocolError is a frame that breaks the protocol: Parse's only error.
type ProtocolError struct {
	Type   Type
	ID     uint32
	Reason string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("invalid TChannel frame (%v, id %d): %s", e.Type, e.ID, e.Reason)
}

// Parse checks the frame f (header and payload, exactly Header.Size bytes)
// and returns what it says. It returns a *ProtocolError if f's size field differs
// from len(f), if f's type is not one tchannel-go handles (or Signal), if a field runs
// past the end of the payload, if a call or continuation frame names a
// checksum type above 3 or carries no argument chunk, if its argument
// chunks do not fill its payload exactly, or if a call request's first
// fragment, with more to follow, does not hold arg1 whole (it must carry
// a chunk after arg1's). It reads f and keeps nothing of
// it, and allocates only for an invalid frame.
//
// It checks the layout, not the values tchannel-go handles safely itself
// (versions, init parameters, codes, checksums, TTLs, flags' other bits).
// Init frames are valid here; a connection decides where they may come.
func Parse(f []byte) (Frame, error) {
	if len(f) < HeaderSize {
		return Frame{}, &ProtocolError{Reason: fmt.Sprintf("%d bytes, shorter than a frame header (%d)", len(f), HeaderSize)}
	}
	fr := Frame{Header: ParseHeader(f)}
	if int(fr.Size) != len(f) {
		return fr, fr.invalid("size field is %d, the frame has %d bytes", fr.Size, len(f))
	}
	p := payload{b: f[HeaderSize:]}
	switch fr.Type {
	case InitReq, InitRes:
		p.skip(2) // version
		for n := p.uint16(); n > 0 && p.ok(); n-- {
			p.str16()
			p.str16()
		}
		if !p.ok() {
			return fr, fr.invalid("%s", p.why)
		}
		// Bytes after the last parameter are ignored, as tchannel-go does.
		return fr, nil
	case CallReq:
		flags := p.byte()
		fr.More = flags&MoreFragments != 0
		fr.TTL = p.uint32()
		p.skip(TracingSize)
		p.str8() // service
		p.headers()
		chunks, err := p.args(&fr)
		if err == nil && fr.More && chunks == 1 {
			// arg1 could go on in the next fragment. tchannel-go's server
			// reads arg1 to dispatch the call; if the next fragment never
			// comes (the peer closes, a timeout), it releases this frame
			// to its pool twice (inbound.go:185 after the fragment's own
			// release), and two later frames share one buffer: another
			// connection's call is overwritten, or the process panics.
			// tchannel-go's relay, too, wants arg1 whole and arg2's length
			// in the first fragment, and its writers always send them.
			return fr, fr.invalid("a first fragment with more to follow carries only arg1's chunk; arg1 must end in it, and arg2's first chunk follow")
		}
		return fr, err
	case CallRes:
		fr.More = p.byte()&MoreFragments != 0
		p.skip(1 + TracingSize) // code, tracing
		p.headers()
		_, err := p.args(&fr)
		return fr, err
	case CallReqContinue, CallResContinue:
		fr.More = p.byte()&MoreFragments != 0
		_, err := p.args(&fr)
		return fr, err
	case Cancel:
		p.skip(4 + TracingSize) // ttl, tracing
		p.str16()               // why
	case Error:
		p.skip(1 + TracingSize) // code, tracing
		p.str16()               // message
	case PingReq, PingRes:
		// No payload; tchannel-go ignores any.
		return fr, nil
	case Signal:
		return fr, parseSignal(fr, &p)
	case Claim:
		return fr, fr.invalid("claim frames are not supported")
	default:
		return fr, fr.invalid("unknown frame type")
	}
	if !p.ok() {
		return fr, fr.invalid("%s", p.why)
	}
	return fr, nil
}

// ParseError reads an error frame's payload: its code (a TChannel system
// error code) and its message. ok is false when the payload is too short
// for them; a message longer than the payload is cut to it.
func ParseError(payload []byte) (code byte, message string, ok bool) {
	if len(payload) < 1+TracingSize+2 {
		return 0, "", false
	}
	msg := payload[1+TracingSize+2:]
	n := int(binary.BigEndian.Uint16(payload[1+TracingSize:]))
	return payload[0], string(msg[:min(n, len(msg))]), true
}

func (fr Frame) invalid(format string, args ...any) error {
	return &ProtocolError{Type: fr.Type, ID: fr.ID, Reason: fmt.Sprintf(format, args...)}
}

// payload reads a frame's payload field by field. The first field that
// does not fit sets why; later reads return zeros.
type payload struct {
	b   []byte
	why string
}

func (p *payload) ok() bool { return p.why == "" }

func (p *payload) take(n int, what string) []byte {
	if p.why != "" {
		return nil
	}
	if n > len(p.b) {
		p.why = fmt.Sprintf("%s needs %d bytes, %d are left in the payload", what, n, len(p.b))
		return nil
	}
	v := p.b[:n]
	p.b = p.b[n:]
	return v
}

func (p *payload) skip(n int) { p.take(n, "a fixed field") }

func (p *payload) byte() byte {
	if b := p.take(1, "a 1-byte field"); b != nil {
		return b[0]
	}
	return 0
}

func (p *payload) uint16() uint16 {
	if b := p.take(2, "a 2-byte field"); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (p *payload) uint32() uint32 {
	if b := p.take(4, "a 4-byte field"); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (p *payload) str8()  { p.take(int(p.byte()), "a string") }
func (p *payload) str16() { p.take(int(p.uint16()), "a string") }

// headers reads a call frame's transport headers.
func (p *payload) headers() {
	for n := p.byte(); n > 0 && p.ok(); n-- {
		p.str8()
		p.str8()
	}
}

// args reads a call or continuation frame's checksum and argument chunks,
// which must fill the rest of the payload, and returns how many chunks
// there are.
func (p *payload) args(fr *Frame) (int, error) {
	csum := p.byte()
	if !p.ok() {
		return 0, fr.invalid("%s", p.why)
	}
	if csum > maxChecksumType {
		return 0, fr.invalid("checksum type is %d, must be 0 to %d", csum, maxChecksumType)
	}
	if csum != ChecksumNone {
		p.skip(4)
	}
	if !p.ok() {
		return 0, fr.invalid("%s", p.why)
	}
	if len(p.b) == 0 {
		return 0, fr.invalid("no argument chunk (a fragment carries at least one, if empty)")
	}
	chunks := 0
	for len(p.b) > 0 {
		n := p.uint16()
		p.take(int(n), "an argument chunk")
		if !p.ok() {
			return chunks, fr.invalid("%s", p.why)
		}
		chunks++
	}
	return chunks, nil
}
