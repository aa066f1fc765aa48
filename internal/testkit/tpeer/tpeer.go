// Package tpeer is a hand-made TChannel peer on a raw socket, for tests: it
// sends any frame, valid or not, and reads back what comes, so that a test
// can play a hostile client or server against real tchannel-go code.
package tpeer

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/internal/tframe"
)

// Peer is one connection. Its methods fail the test on an unexpected error.
type Peer struct {
	t testing.TB
	net.Conn
}

// Dial connects to addr; the connection is closed when the test ends.
func Dial(t testing.TB, addr string) *Peer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Peer{t: t, Conn: c}
}

// New wraps a connection made otherwise (an accepted one, for a hostile
// server).
func New(t testing.TB, c net.Conn) *Peer { return &Peer{t: t, Conn: c} }

// Handshake sends an init request and reads the init response.
func (p *Peer) Handshake() {
	p.t.Helper()
	p.Send(tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: tframe.InitParams("0.0.0.0:0", "tpeer")}))
	if f := p.Next(); f.Type != tframe.InitRes {
		p.t.Fatalf("handshake: got a %v frame (%q), want an init res", f.Type, f.Message)
	}
}

// Send writes the frames.
func (p *Peer) Send(frames ...[]byte) {
	p.t.Helper()
	for _, f := range frames {
		if _, err := p.Write(f); err != nil {
			p.t.Fatalf("send: %v", err)
		}
	}
}

// Frame is a frame read back, with an error frame's code and message.
type Frame struct {
	tframe.Header
	Code    byte
	Message string
	Payload []byte
}

// Next reads the next frame, failing the test if none comes within
// testwait.Limit.
func (p *Peer) Next() Frame {
	p.t.Helper()
	f, err := p.TryNext(testwait.Limit)
	if err != nil {
		p.t.Fatalf("read a frame: %v", err)
	}
	return f
}

// TryNext reads the next frame within timeout.
func (p *Peer) TryNext(timeout time.Duration) (Frame, error) {
	p.SetReadDeadline(time.Now().Add(timeout))
	return ReadFrame(p.Conn)
}

// ReadFrame reads one frame from r.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [tframe.HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Header: tframe.ParseHeader(h[:])}
	if f.Size < tframe.HeaderSize {
		return f, errors.New("tpeer: a frame's size field is below its header's")
	}
	f.Payload = make([]byte, int(f.Size)-tframe.HeaderSize)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return Frame{}, err
	}
	if f.Type == tframe.Error {
		f.Code, f.Message, _ = tframe.ParseError(f.Payload)
	}
	return f, nil
}

// ClosedByServer reads until the other side closes the connection, failing
// the test if it does not within testwait.Limit.
func (p *Peer) ClosedByServer() {
	p.t.Helper()
	deadline := time.Now().Add(testwait.Limit)
	for {
		_, err := p.TryNext(time.Until(deadline))
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			p.t.Fatalf("the other side did not close the connection within %v", testwait.Limit)
		}
		return // EOF, reset, or closed: it is gone
	}
}

// CallReq is a raw call request of method on service, with arg3.
func CallReq(id uint32, service, method string, more bool, arg3 []byte) []byte {
	return tframe.AppendCallReq(nil, id, tframe.Call{TTL: 120_000, Service: service,
		Headers:  [][2]string{{"as", "raw"}, {"cn", "tpeer"}},
		Fragment: tframe.Fragment{More: more, Chunks: [][]byte{[]byte(method), nil, arg3}}})
}

// Fragment is a call request continuation carrying more of arg3.
func Fragment(id uint32, more bool, arg3 []byte) []byte {
	return tframe.AppendContinue(nil, tframe.CallReqContinue, id, tframe.Fragment{More: more, Chunks: [][]byte{arg3}})
}
