package tframe

import (
	"bytes"
	"encoding/binary"
)

// Signal is the type of Sluice's signal frames: key/value pairs one Sluice
// peer sends another below tchannel-go (package tchconn is the carrier and
// documents the keys). The protocol leaves the type unassigned; a signal
// frame goes only to a peer that announced signals in its init frame, and
// is never handed to tchannel-go.
//
//	signal         nh:1 (key~1 value~1){nh}
const Signal Type = 0x53

// ConnID is the id of a frame about the whole connection rather than one
// message: an error frame that ends it, a signal for every call on it.
const ConnID = 0xFFFFFFFF

// AppendSignal appends a signal frame with id (ConnID, or the id of the
// call it is about) carrying the pairs kvs, each key and value at most
// 255 bytes.
func AppendSignal(dst []byte, id uint32, kvs [][2]string) []byte {
	return Append(dst, Signal, id, appendHeaders(nil, kvs))
}

// SignalPairs calls fn with each key/value pair of a signal frame's
// payload, in order, without allocating. Call it only on a frame Parse
// accepted.
func SignalPairs(payload []byte, fn func(key, value []byte)) {
	p := payload
	n := int(p[0])
	p = p[1:]
	str := func() []byte {
		l := 1 + int(p[0])
		s := p[1:l]
		p = p[l:]
		return s
	}
	for range n {
		k := str()
		fn(k, str())
	}
}

// parseSignal checks a signal frame's payload: its pairs must fill it
// exactly.
func parseSignal(fr Frame, p *payload) error {
	p.headers()
	switch {
	case !p.ok():
		return fr.invalid("%s", p.why)
	case len(p.b) > 0:
		return fr.invalid("%d bytes after the last pair of a signal frame", len(p.b))
	}
	return nil
}

// InitParamsOf returns the version and the parameters of the init frame f,
// which Parse accepted.
func InitParamsOf(f []byte) (version uint16, params [][2]string) {
	p := f[HeaderSize:]
	version = binary.BigEndian.Uint16(p)
	n := int(binary.BigEndian.Uint16(p[2:]))
	p = p[4:]
	params = make([][2]string, 0, n)
	str := func() string {
		l := int(binary.BigEndian.Uint16(p))
		s := string(p[2 : 2+l])
		p = p[2+l:]
		return s
	}
	for range n {
		k := str()
		params = append(params, [2]string{k, str()})
	}
	return version, params
}

// CutRoutingDelegate returns a whole call request frame f (as Parse
// accepts it) with its routing delegate ("rd" transport header) cut at
// the first byte mark, the header dropped if nothing is left of it, and
// true; or f itself and false when f is not a call request or its routing
// delegate holds no mark. It allocates only when it cuts. A Sluice client
// marks a call's criticality class there (package channel) for Sluice
// servers; a plain peer must not see the mark.
func CutRoutingDelegate(f []byte, mark byte) ([]byte, bool) {
	if len(f) < HeaderSize || Type(f[2]) != CallReq || int(ParseHeader(f).Size) != len(f) {
		return f, false
	}
	p := payload{b: f[HeaderSize:]}
	p.skip(1 + 4 + TracingSize) // flags, ttl, tracing
	p.str8()                    // service
	nh := p.byte()
	for i := byte(0); i < nh && p.ok(); i++ {
		kStart := len(f) - len(p.b)
		k := p.take(int(p.byte()), "a header key")
		vStart := len(f) - len(p.b)
		v := p.take(int(p.byte()), "a header value")
		if !p.ok() || string(k) != "rd" {
			continue
		}
		cut := bytes.IndexByte(v, mark)
		if cut < 0 {
			return f, false
		}
		end := vStart + 1 + len(v)
		out := make([]byte, 0, len(f))
		if cut == 0 { // nothing left: drop the header
			out = append(out, f[:kStart]...)
			out[HeaderSize+1+4+TracingSize+1+int(f[HeaderSize+1+4+TracingSize])]-- // nh
		} else {
			out = append(out, f[:vStart]...)
			out = append(out, byte(cut))
			out = append(out, v[:cut]...)
		}
		out = append(out, f[end:]...)
		binary.BigEndian.PutUint16(out, uint16(len(out)))
		return out, true
	}
	return f, false
}
