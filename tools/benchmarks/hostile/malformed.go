package hostile

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// frameCase is bytes sent on a connection of their own.
type frameCase struct {
	name string
	// handshake: complete the init handshake before sending.
	handshake bool
	bytes     func() []byte
	// closeWrite: half-close the connection after sending (a frame whose
	// size says more than was sent, then nothing).
	closeWrite bool
}

// The call frames the cases build on. Ids are odd, as a caller's are.
const caseID = 3

// call is a valid call request to echo on service Service with arg3 x.
func call(id uint32, frag tframe.Fragment) []byte {
	return tframe.AppendCallReq(nil, id, tframe.Call{TTL: 1000, Service: Service, Headers: callHeaders("raw"), Fragment: frag})
}

// echoChunks are a complete call's argument chunks: method, arg2, arg3.
func echoChunks() [][]byte { return [][]byte{[]byte(MethodEcho), nil, []byte("x")} }

// callPrefix is a call request's payload up to its service.
func callPrefix() []byte {
	p := []byte{0}
	p = binary.BigEndian.AppendUint32(p, 1000)
	return append(p, make([]byte, tframe.TracingSize)...)
}

// withSize returns f with its size field set to n, whatever its length.
func withSize(f []byte, n uint16) []byte {
	binary.BigEndian.PutUint16(f, n)
	return f
}

// randomBytes are n bytes from a fixed seed: the same garbage every run.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// crashFrames are the two frames the adversarial probe found crash
// tchannel-go's readers: attack "checksum".
func crashFrames() []frameCase {
	return []frameCase{
		{name: "call req, checksum type 4", handshake: true, bytes: func() []byte {
			return call(caseID, tframe.Fragment{ChecksumType: 4, Checksum: []byte{0, 0, 0, 0}, Chunks: echoChunks()})
		}},
		{name: "call req, no argument chunk", handshake: true, bytes: func() []byte {
			return call(caseID, tframe.Fragment{})
		}},
	}
}

// malformedFrames are the malformed and out-of-place frames of attack
// "malformed", the two crash frames first.
func malformedFrames() []frameCase {
	first := call(caseID, tframe.Fragment{More: true, Chunks: [][]byte{[]byte(MethodEcho), nil, []byte("x")}})
	cases := crashFrames()
	cases = append(cases, []frameCase{
		{name: "continuation, checksum type 4", handshake: true, bytes: func() []byte {
			return tframe.AppendContinue(first, tframe.CallReqContinue, caseID, tframe.Fragment{ChecksumType: 4, Checksum: []byte{0, 0, 0, 0}, Chunks: [][]byte{[]byte("y")}})
		}},
		{name: "continuation, no argument chunk", handshake: true, bytes: func() []byte {
			return tframe.AppendContinue(first, tframe.CallReqContinue, caseID, tframe.Fragment{})
		}},
		{name: "unknown frame type 0x55", handshake: true, bytes: func() []byte {
			return tframe.Append(nil, tframe.Type(0x55), caseID, []byte("hello"))
		}},
		{name: "size field 8 (< 16)", handshake: true, bytes: func() []byte {
			return withSize(tframe.Append(nil, tframe.CallReq, caseID, nil), 8)
		}},
		{name: "size field 0", handshake: true, bytes: func() []byte {
			return withSize(tframe.Append(nil, tframe.CallReq, caseID, nil), 0)
		}},
		{name: "size 1000, 100 bytes sent, then FIN", handshake: true, closeWrite: true, bytes: func() []byte {
			return withSize(tframe.Append(nil, tframe.CallReq, caseID, make([]byte, 84)), 1000)
		}},
		{name: "call req of a header only", handshake: true, bytes: func() []byte {
			return tframe.Append(nil, tframe.CallReq, caseID, nil)
		}},
		{name: "call req cut in its tracing", handshake: true, bytes: func() []byte {
			return tframe.Append(nil, tframe.CallReq, caseID, callPrefix()[:15])
		}},
		{name: "service length past the end", handshake: true, bytes: func() []byte {
			return tframe.Append(nil, tframe.CallReq, caseID, append(callPrefix(), 200, 'e', 'c', 'h'))
		}},
		{name: "header count 255, one header", handshake: true, bytes: func() []byte {
			p := append(callPrefix(), byte(len(Service)))
			p = append(p, Service...)
			return tframe.Append(nil, tframe.CallReq, caseID, append(p, 255, 2, 'a', 's', 3, 'r', 'a', 'w'))
		}},
		{name: "argument chunk length past the end", handshake: true, bytes: func() []byte {
			f := call(caseID, tframe.Fragment{Chunks: [][]byte{[]byte(MethodEcho), nil, make([]byte, 10)}})
			binary.BigEndian.PutUint16(f[len(f)-12:], 5000) // arg3's length
			return f
		}},
		{name: "checksum type 1, checksum cut short", handshake: true, bytes: func() []byte {
			return call(caseID, tframe.Fragment{ChecksumType: tframe.ChecksumCRC32, Checksum: []byte{1, 2}})
		}},
		{name: "two call reqs with one id", handshake: true, bytes: func() []byte {
			return append(append([]byte(nil), first...), first...)
		}},
		{name: "continuation for an unknown id", handshake: true, bytes: func() []byte {
			return tframe.AppendContinue(nil, tframe.CallReqContinue, 77, tframe.Fragment{Chunks: [][]byte{[]byte("y")}})
		}},
		{name: "call res for an unknown id", handshake: true, bytes: func() []byte {
			return tframe.AppendCallRes(nil, 77, tframe.Call{Headers: callHeaders("raw"), Fragment: tframe.Fragment{Chunks: [][]byte{nil, nil, nil}}})
		}},
		{name: "error frame for an unknown id", handshake: true, bytes: func() []byte {
			return tframe.AppendError(nil, 77, 0x05, "unexpected")
		}},
		{name: "cancel for an unknown id", handshake: true, bytes: func() []byte {
			return tframe.AppendCancel(nil, 77, "no reason")
		}},
		{name: "claim frame", handshake: true, bytes: func() []byte {
			return tframe.Append(nil, tframe.Claim, caseID, make([]byte, 4+tframe.TracingSize))
		}},
		{name: "ping res nobody asked for", handshake: true, bytes: func() []byte {
			return tframe.Append(nil, tframe.PingRes, 77, nil)
		}},
		{name: "call req, empty service", handshake: true, bytes: func() []byte {
			return tframe.AppendCallReq(nil, caseID, tframe.Call{TTL: 1000, Headers: callHeaders("raw"), Fragment: tframe.Fragment{Chunks: echoChunks()}})
		}},
		{name: "init req sent twice", handshake: true, bytes: initReq},
		{name: "256 random bytes after the handshake", handshake: true, bytes: func() []byte { return randomBytes(256, 2) }},
		{name: "call req before the handshake", bytes: func() []byte {
			return call(caseID, tframe.Fragment{Chunks: echoChunks()})
		}},
		{name: "ping req before the handshake", bytes: func() []byte {
			return tframe.Append(nil, tframe.PingReq, caseID, nil)
		}},
		{name: "init res instead of init req", bytes: func() []byte {
			return tframe.AppendInit(nil, tframe.InitRes, 1, tframe.Init{Version: 2, Params: tframe.InitParams("0.0.0.0:0", attackerName)})
		}},
		{name: "init req, version 99", bytes: func() []byte {
			return tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 99, Params: tframe.InitParams("0.0.0.0:0", attackerName)})
		}},
		{name: "init req, 65535 params in 10 bytes", bytes: func() []byte {
			return tframe.Append(nil, tframe.InitReq, 1, []byte{0, 2, 0xFF, 0xFF, 0, 1, 'a', 0, 1, 'b'})
		}},
		{name: "init req without host_port", bytes: func() []byte {
			return tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: [][2]string{{"process_name", attackerName}}})
		}},
		{name: "init req, key length past the end", bytes: func() []byte {
			return tframe.Append(nil, tframe.InitReq, 1, []byte{0, 2, 0, 1, 0x40, 0, 'h', 'o', 's', 't'})
		}},
		{name: "256 random bytes before the handshake", bytes: func() []byte { return randomBytes(256, 1) }},
	}...)
	return cases
}

// deathWait is how long a server that closed a connection is watched for
// dying: a Go panic ends a process within milliseconds.
const deathWait = 200 * time.Millisecond

// runFrameCase sends fc on a new connection, waits at most closeWait for
// the server to close it, checks the server survived (restarting it if
// not), and has a new client make a call.
func (e *env) runFrameCase(fc frameCase) Case {
	c := Case{Name: fc.name}
	if !e.t.Alive() {
		c.Note = "not sent: the server is down"
		return c
	}
	conn, err := dialRaw(e.ctx, e.t.Addr, "")
	if err != nil {
		c.Note = "not sent: " + err.Error()
		e.r.problem("%s: connect: %v", fc.name, err)
		return c
	}
	defer conn.Close()
	if fc.handshake {
		if err := conn.handshake(5 * time.Second); err != nil {
			c.Note = "not sent: handshake: " + err.Error()
			e.r.problem("%s: handshake: %v", fc.name, err)
			e.survived(&c, time.Second)
			return c
		}
	}
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(fc.bytes()); err != nil {
		c.Note = "write: " + err.Error()
	}
	if fc.closeWrite {
		conn.Conn.(*net.TCPConn).CloseWrite()
	}
	closed, after, answer, answerAfter := conn.waitClosed(e.p.closeWait)
	c.Closed, c.After, c.Answer = closed, millis.Duration(after), answer
	if !c.Closed && c.Answer != "" {
		c.After = millis.Duration(answerAfter)
	}
	// A frame that crashes the server closes the connection as the
	// process dies; give the death a moment to show.
	wait := time.Duration(0)
	if c.Closed {
		wait = deathWait
	}
	e.survived(&c, wait)
	if c.Survived {
		call := oneCall(e.ctx, e.t.Addr, []byte("after "+fc.name), e.p.deadline)
		c.Next = &call
	}
	return c
}

func runMalformed(e *env) error {
	e.before()
	s := e.sample()
	for _, fc := range malformedFrames() {
		if e.ctx.Err() != nil {
			return e.ctx.Err()
		}
		e.r.Cases = append(e.r.Cases, e.runFrameCase(fc))
	}
	e.peaks(s)
	e.after()
	survived, closed, served := 0, 0, 0
	for _, c := range e.r.Cases {
		if c.Survived {
			survived++
		}
		if c.Closed {
			closed++
		}
		if c.Next != nil && c.Next.OK {
			served++
		}
	}
	n := len(e.r.Cases)
	e.r.fig("cases", "%d: server survived %d, closed the connection %d, served a new client after %d", n, survived, closed, served)
	e.r.caseFigures()
	return nil
}
