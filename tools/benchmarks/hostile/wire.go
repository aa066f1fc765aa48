package hostile

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/tframe"
)

// The TChannel names the attacks use.
const (
	// Service is the service `sluice serve` answers to by default.
	Service = "echo"
	// MethodEcho answers with the request's arg2 and arg3.
	MethodEcho = "echo"
	// attackerName is the attackers' process and caller name.
	attackerName = "sluice-hostile"
)

// maxChunks is the room for argument chunks in a call request of service
// with transport headers hs.
func maxChunks(service string, hs [][2]string) int {
	n := tframe.MaxSize - tframe.HeaderSize - 1 - 4 - tframe.TracingSize - 1 - len(service) - 1 - 1
	for _, kv := range hs {
		n -= 2 + len(kv[0]) + len(kv[1])
	}
	return n
}

// callHeaders are a call's transport headers; tchannel-go requires cn.
func callHeaders(scheme string) [][2]string {
	return [][2]string{{"as", scheme}, {"cn", attackerName}}
}

// callSpec is a call request to echo of Service, to send as frames.
type callSpec struct {
	id         uint32
	ttl        time.Duration
	scheme     string // "raw" or "json"
	arg2, arg3 []byte
	fragment   int // bounds every frame's argument chunks (0: as much as fits)
}

func echoCall(id uint32, ttl time.Duration, arg3 []byte) callSpec {
	return callSpec{id: id, ttl: ttl, scheme: "raw", arg3: arg3}
}

// frames calls f with each frame of the call (reused for the next), more
// set on all but the last, and stops at f's first error. An argument that
// ends a frame is closed by an empty chunk at the start of the next.
func (c callSpec) frames(f func(frame []byte, more bool) error) error {
	args := [][]byte{[]byte(MethodEcho), c.arg2, c.arg3}
	hs := callHeaders(c.scheme)
	room, cont := maxChunks(Service, hs), tframe.MaxSize-tframe.HeaderSize-1-1 // flags, checksum type
	if c.fragment > 0 {
		room, cont = min(room, c.fragment), min(cont, c.fragment)
	}
	var buf []byte
	ai, off := 0, 0
	closePrev := false // the previous frame ended exactly at the end of args[ai-1]
	for n := 0; ai < len(args); n, room = n+1, cont {
		var chunks [][]byte
		if closePrev {
			chunks, room, closePrev = append(chunks, nil), room-2, false
		}
		for ai < len(args) && room >= 2 {
			take := min(len(args[ai])-off, room-2)
			chunks = append(chunks, args[ai][off:off+take])
			room -= 2 + take
			if off += take; off < len(args[ai]) {
				break // the frame is full mid-argument
			}
			ai, off = ai+1, 0
			closePrev = ai < len(args) && room < 2 // the next frame's first chunk closes this argument
		}
		frag := tframe.Fragment{More: ai < len(args), Chunks: chunks}
		if n == 0 {
			buf = tframe.AppendCallReq(buf[:0], c.id, tframe.Call{TTL: uint32(c.ttl / time.Millisecond), Service: Service, Headers: hs, Fragment: frag})
		} else {
			buf = tframe.AppendContinue(buf[:0], tframe.CallReqContinue, c.id, frag)
		}
		if err := f(buf, frag.More); err != nil {
			return err
		}
	}
	return nil
}

// rawConn is a TChannel connection spoken frame by frame.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(ctx context.Context, addr string, d net.Dialer) (*rawConn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c, r: bufio.NewReaderSize(c, 4096)}, nil
}

// dialHandshaken connects to addr through d and makes the handshake.
func dialHandshaken(ctx context.Context, addr string, d net.Dialer) (*rawConn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := dialRaw(dctx, addr, d)
	if err != nil {
		return nil, err
	}
	if err := c.handshake(handshakeTimeout); err != nil {
		c.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return c, nil
}

func initReq() []byte {
	return tframe.AppendInit(nil, tframe.InitReq, 1, tframe.Init{Version: 2, Params: tframe.InitParams("0.0.0.0:0", attackerName)})
}

// handshake sends an init request and reads the response within limit.
func (c *rawConn) handshake(limit time.Duration) error {
	c.SetDeadline(time.Now().Add(limit))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(initReq()); err != nil {
		return fmt.Errorf("send the init request: %w", err)
	}
	h, f, err := c.readFrame()
	if err != nil {
		return fmt.Errorf("read the init response: %w", err)
	}
	if h.Type != tframe.InitRes {
		return fmt.Errorf("the server answered the init request with %v %s", h.Type, describe(h, f))
	}
	return nil
}

func (c *rawConn) readFrame() (tframe.Header, []byte, error) {
	hb, err := c.r.Peek(tframe.HeaderSize)
	if err != nil {
		return tframe.Header{}, nil, err
	}
	h := tframe.ParseHeader(hb)
	if h.Size < tframe.HeaderSize {
		return h, nil, fmt.Errorf("the server sent a frame of size %d, less than a header", h.Size)
	}
	f := make([]byte, h.Size)
	_, err = io.ReadFull(c.r, f)
	return h, f, err
}

// describe is a short account of an error frame f: its code and message.
func describe(h tframe.Header, f []byte) string {
	if h.Type != tframe.Error {
		return ""
	}
	if code, msg, ok := tframe.ParseError(f[tframe.HeaderSize:]); ok {
		return fmt.Sprintf("%s %q", codes.Code(code), msg)
	}
	return ""
}

// answer is the server's answer to one call: an error frame, or a
// response's code (0 ok, 1 application error) and arguments.
type answer struct {
	errCode codes.Code
	errMsg  string // the error frame's description; "" for a response
	code    byte
	args    [3][]byte
}

func (a answer) String() string {
	switch {
	case a.errMsg != "":
		return "error " + a.errMsg
	case a.code == 0:
		return "ok"
	}
	return "application error"
}

var errClosed = errors.New("the server closed the connection")

// readAnswer reads the answer to call id within limit, skipping other
// frames and answering pings.
func (c *rawConn) readAnswer(id uint32, limit time.Duration) (answer, error) {
	c.SetReadDeadline(time.Now().Add(limit))
	defer c.SetReadDeadline(time.Time{})
	var a answer
	ai, started := 0, false
	for {
		h, f, err := c.readFrame()
		switch {
		case isTimeout(err):
			return a, err
		case err != nil:
			return a, errClosed
		case h.Type == tframe.PingReq:
			c.Write(tframe.Append(nil, tframe.PingRes, h.ID, nil))
			continue
		case h.ID != id:
			continue
		case h.Type == tframe.Error:
			a.errCode, a.errMsg = codes.Code(f[tframe.HeaderSize]), describe(h, f)
			return a, nil
		case h.Type != tframe.CallRes && h.Type != tframe.CallResContinue:
			continue
		}
		fr, err := tframe.Parse(f)
		if err != nil {
			return a, fmt.Errorf("the server sent an invalid frame: %w", err)
		}
		p := f[tframe.HeaderSize:]
		var chunks [][]byte
		if h.Type == tframe.CallRes {
			started, a.code = true, p[1]
			chunks = splitChunks(p[1+1+tframe.TracingSize:], true)
		} else if started {
			chunks = splitChunks(p[1:], false)
		}
		for i, ch := range chunks {
			if i > 0 {
				ai++
			}
			if ai < len(a.args) {
				a.args[ai] = append(a.args[ai], ch...)
			}
		}
		if !fr.More {
			return a, nil
		}
	}
}

// splitChunks returns the argument chunks of a parsed call frame's
// payload from its headers on (withHeaders) or its checksum type on.
func splitChunks(p []byte, withHeaders bool) [][]byte {
	if withHeaders {
		nh := int(p[0])
		p = p[1:]
		for i := 0; i < 2*nh; i++ {
			p = p[1+int(p[0]):]
		}
	}
	if p[0] == tframe.ChecksumNone {
		p = p[1:]
	} else {
		p = p[1+4:]
	}
	var chunks [][]byte
	for len(p) >= 2 {
		n := int(binary.BigEndian.Uint16(p))
		chunks = append(chunks, p[2:2+n])
		p = p[2+n:]
	}
	return chunks
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// waitClosed discards what the server sends on c until it closes it or
// limit passes, and reports whether and when it closed, and the first
// frame it sent, and when.
func (c *rawConn) waitClosed(limit time.Duration) (closed bool, after time.Duration, sent string, sentAfter time.Duration) {
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	defer c.SetReadDeadline(time.Time{})
	for {
		h, f, err := c.readFrame()
		if err != nil {
			return !isTimeout(err), time.Since(start), sent, sentAfter
		}
		if sent == "" {
			sent, sentAfter = h.Type.String(), time.Since(start)
			if d := describe(h, f); d != "" {
				sent += " " + d
			}
		}
	}
}

// rawServer is a hostile TChannel server on 127.0.0.1: it answers the
// handshake and pings, and passes each connection's call request ids to
// handle, which runs beside the connection's reader with a serialised
// write function.
type rawServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	callReqs atomic.Int64
}

func startRawServer(handle func(ids <-chan uint32, write func([]byte) error)) (*rawServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &rawServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c, handle) })
		}
	})
	return s, nil
}

func (s *rawServer) serve(c net.Conn, handle func(<-chan uint32, func([]byte) error)) {
	defer c.Close()
	var wmu sync.Mutex
	write := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := c.Write(b)
		return err
	}
	ids, handled := make(chan uint32, bigAnswers), make(chan struct{}) // room for every call in flight
	go func() {
		defer close(handled)
		handle(ids, write)
	}()
	defer func() {
		close(ids)
		<-handled
	}()
	rc := &rawConn{Conn: c, r: bufio.NewReader(c)}
	for {
		h, _, err := rc.readFrame()
		if err != nil {
			return
		}
		var out []byte
		switch h.Type {
		case tframe.CallReq:
			s.callReqs.Add(1)
			ids <- h.ID
		case tframe.InitReq:
			out = tframe.AppendInit(nil, tframe.InitRes, h.ID, tframe.Init{Version: 2, Params: tframe.InitParams(s.addr(), "hostile-server")})
		case tframe.PingReq:
			out = tframe.Append(nil, tframe.PingRes, h.ID, nil)
		}
		if out != nil && write(out) != nil {
			return
		}
	}
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
