package tframe

import "encoding/binary"

// The Append functions append one frame to dst and return the extended
// slice. They write what they are given, valid or not, so that tests and
// attack tools can make any frame: the caller keeps a payload within
// MaxSize-HeaderSize bytes (the size field keeps only 16 bits).

// Append appends a frame of type t and id with payload as it is.
func Append(dst []byte, t Type, id uint32, payload []byte) []byte {
	dst = appendHeader(dst, t, id, len(payload))
	return append(dst, payload...)
}

func appendHeader(dst []byte, t Type, id uint32, payloadLen int) []byte {
	var h [HeaderSize]byte
	binary.BigEndian.PutUint16(h[0:], uint16(HeaderSize+payloadLen))
	h[2] = byte(t)
	binary.BigEndian.PutUint32(h[4:], id)
	return append(dst, h[:]...)
}

// Init is the payload of an init request or response.
type Init struct {
	Version uint16 // 2 is tchannel-go's
	Params  [][2]string
}

// AppendInit appends an init frame of type t (InitReq or InitRes).
func AppendInit(dst []byte, t Type, id uint32, in Init) []byte {
	p := binary.BigEndian.AppendUint16(nil, in.Version)
	p = binary.BigEndian.AppendUint16(p, uint16(len(in.Params)))
	for _, kv := range in.Params {
		p = appendStr16(p, kv[0])
		p = appendStr16(p, kv[1])
	}
	return Append(dst, t, id, p)
}

// InitParams returns the init parameters tchannel-go requires, for a peer
// at hostPort ("0.0.0.0:0" for one that does not listen) named process.
func InitParams(hostPort, process string) [][2]string {
	return [][2]string{{"host_port", hostPort}, {"process_name", process},
		{"tchannel_language", "go"}, {"tchannel_language_version", "sluice"}, {"tchannel_version", "sluice"}}
}

// Call is a call request's or response's fields: a Fragment with the
// fields only the first frame of a call has.
type Call struct {
	// Code is a response's code (0 ok, 1 application error); requests have
	// none.
	Code    byte
	TTL     uint32 // a request's time to live in ms; responses have none
	Service string // requests only
	// Headers are the transport headers as key, value pairs ("as": the arg
	// scheme, "cn": the caller's name).
	Headers [][2]string
	Fragment
}

// Fragment is what every call and continuation frame carries.
type Fragment struct {
	// More sets the MoreFragments flag.
	More bool
	// ChecksumType is written as it is; Checksum follows it (4 bytes for
	// types 1 to 3, nothing for 0, as the protocol says; the Append
	// functions write what they are given).
	ChecksumType byte
	Checksum     []byte
	// Chunks are the argument chunks, each written with its 2-byte length.
	Chunks [][]byte
}

// AppendCallReq appends a call request frame.
func AppendCallReq(dst []byte, id uint32, c Call) []byte {
	p := []byte{c.flags()}
	p = binary.BigEndian.AppendUint32(p, c.TTL)
	p = append(p, make([]byte, TracingSize)...)
	p = appendStr8(p, c.Service)
	p = appendHeaders(p, c.Headers)
	return Append(dst, CallReq, id, c.appendArgs(p))
}

// AppendCallRes appends a call response frame.
func AppendCallRes(dst []byte, id uint32, c Call) []byte {
	p := []byte{c.flags(), c.Code}
	p = append(p, make([]byte, TracingSize)...)
	p = appendHeaders(p, c.Headers)
	return Append(dst, CallRes, id, c.appendArgs(p))
}

// AppendContinue appends a continuation frame of type t (CallReqContinue
// or CallResContinue).
func AppendContinue(dst []byte, t Type, id uint32, f Fragment) []byte {
	return Append(dst, t, id, f.appendArgs([]byte{f.flags()}))
}

// AppendError appends an error frame with code (a TChannel system error
// code: 0x03 is Busy) and message.
func AppendError(dst []byte, id uint32, code byte, message string) []byte {
	p := append([]byte{code}, make([]byte, TracingSize)...)
	return Append(dst, Error, id, appendStr16(p, message))
}

// AppendCancel appends a cancel frame for the call id, saying why.
func AppendCancel(dst []byte, id uint32, why string) []byte {
	p := make([]byte, 4+TracingSize)
	return Append(dst, Cancel, id, appendStr16(p, why))
}

func (f Fragment) flags() byte {
	if f.More {
		return MoreFragments
	}
	return 0
}

func (f Fragment) appendArgs(p []byte) []byte {
	p = append(p, f.ChecksumType)
	p = append(p, f.Checksum...)
	for _, c := range f.Chunks {
		p = binary.BigEndian.AppendUint16(p, uint16(len(c)))
		p = append(p, c...)
	}
	return p
}

func appendHeaders(p []byte, hs [][2]string) []byte {
	p = append(p, byte(len(hs)))
	for _, kv := range hs {
		p = appendStr8(p, kv[0])
		p = appendStr8(p, kv[1])
	}
	return p
}

func appendStr8(p []byte, s string) []byte { return append(append(p, byte(len(s))), s...) }
func appendStr16(p []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(p, uint16(len(s))), s...)
}
