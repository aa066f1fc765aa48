package hostile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

func runChecksum(e *env) error {
	e.before()
	s := e.sample()
	for _, fc := range crashFrames() {
		e.r.Cases = append(e.r.Cases, e.runFrameCase(fc))
	}
	e.peaks(s)
	e.after()
	e.r.caseFigures()
	return nil
}

// clientTimeout is the deadline of the `sluice call` made against the
// hostile server; clientLimit bounds the child's whole life.
const (
	clientTimeout = 2 * time.Second
	clientLimit   = 30 * time.Second
)

// runChecksumClient runs `sluice call` against a hostile server that
// answers every call with a crash frame, once per frame.
func runChecksumClient(e *env) error {
	replies := []struct {
		name  string
		reply func(id uint32) []byte
	}{
		{"call res, checksum type 4", func(id uint32) []byte {
			return tframe.AppendCallRes(nil, id, tframe.Call{Headers: callHeaders("raw"),
				Fragment: tframe.Fragment{ChecksumType: 4, Checksum: []byte{0, 0, 0, 0}, Chunks: [][]byte{nil, nil, []byte("x")}}})
		}},
		{"call res, no argument chunk", func(id uint32) []byte {
			return tframe.AppendCallRes(nil, id, tframe.Call{Headers: callHeaders("raw")})
		}},
	}
	for _, r := range replies {
		c, err := e.clientCase(r.name, r.reply)
		if err != nil {
			return err
		}
		e.r.Cases = append(e.r.Cases, c)
	}
	e.r.caseFigures()
	return nil
}

// clientCase runs one `sluice call` against a hostile server answering
// with reply.
func (e *env) clientCase(name string, reply func(uint32) []byte) (Case, error) {
	hs, err := startHostileServer(reply)
	if err != nil {
		return Case{}, err
	}
	defer hs.close()
	bin, err := e.bin()
	if err != nil {
		return Case{}, err
	}
	ctx, cancel := context.WithTimeout(e.ctx, clientLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "call", "-p", hs.addr(), "-s", Service, "-m", MethodEcho, "-e", "raw", "-r", "x",
		"--timeout", clientTimeout.String())
	cmd.Env = append(os.Environ(), ChildEnv+"=")
	stderr, err := newStderrFile()
	if err != nil {
		return Case{}, err
	}
	defer stderr.close()
	cmd.Stderr = stderr.f
	start := time.Now()
	runErr := cmd.Run()
	c := Case{Name: name, Client: true, After: millis.Duration(time.Since(start)), Exit: -1}
	if cmd.ProcessState != nil {
		c.Exit = cmd.ProcessState.ExitCode()
	}
	c.Crash = stderr.crash()
	c.Survived = c.Crash == "" && ctx.Err() == nil
	switch {
	case ctx.Err() != nil:
		c.Note = fmt.Sprintf("still running after %v, killed", clientLimit)
	case c.Crash != "":
	case runErr == nil:
		c.Note = "the call succeeded"
	default:
		c.Note = stderr.last()
	}
	c.Note += fmt.Sprintf(" (%d call req(s) answered)", hs.calls())
	return c, nil
}

// hostileServer is a TChannel server that answers the init handshake and
// pings, and every call request with a frame of its choice.
type hostileServer struct {
	*rawServer
	reply func(id uint32) []byte
	n     int // call requests answered; rawServer.mu
}

func startHostileServer(reply func(uint32) []byte) (*hostileServer, error) {
	rs, err := listenRaw()
	if err != nil {
		return nil, err
	}
	s := &hostileServer{rawServer: rs, reply: reply}
	rs.start(s.serve)
	return s, nil
}

func (s *hostileServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// serve answers one connection's frames until it closes.
func (s *hostileServer) serve(c net.Conn) {
	defer c.Close()
	rc := &rawConn{Conn: c, r: bufio.NewReader(c)}
	for {
		h, _, err := rc.readFrame()
		if err != nil {
			return
		}
		out := s.handshakeReply(h)
		if h.Type == tframe.CallReq {
			out = s.reply(h.ID)
			s.mu.Lock()
			s.n++
			s.mu.Unlock()
		}
		if out == nil {
			continue
		}
		if _, err := c.Write(out); err != nil && !errors.Is(err, net.ErrClosed) {
			return
		}
	}
}
