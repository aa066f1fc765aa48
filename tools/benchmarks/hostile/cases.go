package hostile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

const (
	caseID = 3 // the cases' call id: odd, as a caller's are
	// deathWait is how long a server that closed a connection is watched
	// for dying: a Go panic ends a process within milliseconds.
	deathWait = 200 * time.Millisecond
	// bigLimit bounds the answer to a big call; bigWriteLimit one write.
	bigLimit      = time.Minute
	bigWriteLimit = 10 * time.Second
	// clientTimeout is `sluice call`'s deadline; clientLimit its life.
	clientTimeout = 2 * time.Second
	clientLimit   = 30 * time.Second
)

// frameCase is bytes sent on a connection of their own, after the init
// handshake if handshake, then a half-close if closeWrite.
type frameCase struct {
	name                  string
	handshake, closeWrite bool
	bytes                 []byte
}

// call is a call request to echo on service Service.
func call(frag tframe.Fragment) []byte {
	return tframe.AppendCallReq(nil, caseID, tframe.Call{TTL: 1000, Service: Service, Headers: callHeaders("raw"), Fragment: frag})
}

// echoChunks are a complete call's argument chunks: method, arg2, arg3.
func echoChunks() [][]byte { return [][]byte{[]byte(MethodEcho), nil, []byte("x")} }

// callPrefix is a call request's payload up to its service.
func callPrefix() []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, 1000), make([]byte, tframe.TracingSize)...)
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

// crashFrames are attack "checksum"'s frames, which crashed tchannel-go.
func crashFrames() []frameCase {
	return []frameCase{
		{"call req, checksum type 4", true, false, call(tframe.Fragment{ChecksumType: 4, Checksum: make([]byte, 4), Chunks: echoChunks()})},
		{"call req, no argument chunk", true, false, call(tframe.Fragment{})},
	}
}

// malformedFrames are attack "malformed"'s frames, the crash frames first.
func malformedFrames() []frameCase {
	first := slices.Clip(call(tframe.Fragment{More: true, Chunks: echoChunks()}))
	raw := func(t tframe.Type, p []byte) []byte { return tframe.Append(nil, t, caseID, p) }
	init := func(t tframe.Type, version uint16, params [][2]string) []byte {
		return tframe.AppendInit(nil, t, 1, tframe.Init{Version: version, Params: params})
	}
	chunkPast := call(tframe.Fragment{Chunks: [][]byte{[]byte(MethodEcho), nil, make([]byte, 10)}})
	binary.BigEndian.PutUint16(chunkPast[len(chunkPast)-12:], 5000) // arg3's length
	params := tframe.InitParams("0.0.0.0:0", attackerName)
	y := [][]byte{[]byte("y")}
	cases := []frameCase{
		{"continuation, checksum type 4", true, false, tframe.AppendContinue(first, tframe.CallReqContinue, caseID, tframe.Fragment{ChecksumType: 4, Checksum: make([]byte, 4), Chunks: y})},
		{"continuation, no argument chunk", true, false, tframe.AppendContinue(first, tframe.CallReqContinue, caseID, tframe.Fragment{})},
		{"unknown frame type 0x55", true, false, raw(0x55, []byte("hello"))},
		{"size field 8 (< 16)", true, false, withSize(raw(tframe.CallReq, nil), 8)},
		{"size field 0", true, false, withSize(raw(tframe.CallReq, nil), 0)},
		{"size 1000, 100 bytes sent, then FIN", true, true, withSize(raw(tframe.CallReq, make([]byte, 84)), 1000)},
		{"call req of a header only", true, false, raw(tframe.CallReq, nil)},
		{"call req cut in its tracing", true, false, raw(tframe.CallReq, callPrefix()[:15])},
		{"service length past the end", true, false, raw(tframe.CallReq, append(callPrefix(), 200, 'e', 'c', 'h'))},
		{"header count 255, one header", true, false, raw(tframe.CallReq, append(append(callPrefix(), byte(len(Service))), Service+"\xff\x02as\x03raw"...))},
		{"argument chunk length past the end", true, false, chunkPast},
		{"checksum type 1, checksum cut short", true, false, call(tframe.Fragment{ChecksumType: tframe.ChecksumCRC32, Checksum: []byte{1, 2}})},
		{"two call reqs with one id", true, false, append(slices.Clone(first), first...)},
		{"continuation for an unknown id", true, false, tframe.AppendContinue(nil, tframe.CallReqContinue, 77, tframe.Fragment{Chunks: y})},
		{"call res for an unknown id", true, false, tframe.AppendCallRes(nil, 77, tframe.Call{Headers: callHeaders("raw"), Fragment: tframe.Fragment{Chunks: [][]byte{nil, nil, nil}}})},
		{"error frame for an unknown id", true, false, tframe.AppendError(nil, 77, 0x05, "unexpected")},
		{"cancel for an unknown id", true, false, tframe.AppendCancel(nil, 77, "no reason")},
		{"claim frame", true, false, raw(tframe.Claim, make([]byte, 4+tframe.TracingSize))},
		{"ping res nobody asked for", true, false, tframe.Append(nil, tframe.PingRes, 77, nil)},
		{"call req, empty service", true, false, tframe.AppendCallReq(nil, caseID, tframe.Call{TTL: 1000, Headers: callHeaders("raw"), Fragment: tframe.Fragment{Chunks: echoChunks()}})},
		{"init req sent twice", true, false, initReq()},
		{"256 random bytes after the handshake", true, false, randomBytes(256, 2)},
		{"call req before the handshake", false, false, call(tframe.Fragment{Chunks: echoChunks()})},
		{"ping req before the handshake", false, false, raw(tframe.PingReq, nil)},
		{"init res instead of init req", false, false, init(tframe.InitRes, 2, params)},
		{"init req, version 99", false, false, init(tframe.InitReq, 99, params)},
		{"init req, 65535 params in 10 bytes", false, false, tframe.Append(nil, tframe.InitReq, 1, []byte{0, 2, 0xFF, 0xFF, 0, 1, 'a', 0, 1, 'b'})},
		{"init req without host_port", false, false, init(tframe.InitReq, 2, [][2]string{{"process_name", attackerName}})},
		{"init req, key length past the end", false, false, tframe.Append(nil, tframe.InitReq, 1, []byte{0, 2, 0, 1, 0x40, 0, 'h', 'o', 's', 't'})},
		{"256 random bytes before the handshake", false, false, randomBytes(256, 1)},
	}
	return append(crashFrames(), cases...)
}

func runChecksum(e *env) error { return e.frameCases(crashFrames(), false) }

func runMalformed(e *env) error { return e.frameCases(malformedFrames(), true) }

// frameCases sends each case on its own connection, and with summary a
// figure counting what the server did. Interrupted, it keeps the figures
// of the cases it sent.
func (e *env) frameCases(cases []frameCase, summary bool) error {
	for _, fc := range cases {
		if e.ctx.Err() != nil {
			break
		}
		e.r.Cases = append(e.r.Cases, e.runFrameCase(fc))
	}
	if summary {
		survived, closed, served := e.r.caseCounts()
		e.r.fig("cases", "%d: server survived %d, closed the connection %d, served a new client after %d", len(e.r.Cases), survived, closed, served)
	}
	e.r.caseFigures()
	return e.end(e.ctx.Err(), 0)
}

// runFrameCase sends fc on a new connection, waits at most closeWait for
// the server to close it, checks it survived, and has a new client call.
func (e *env) runFrameCase(fc frameCase) Case {
	c := Case{Name: fc.name}
	if !e.t.Alive() {
		c.Note = "not sent: the server is down"
		return c
	}
	conn, err := dialRaw(e.ctx, e.t.Addr, net.Dialer{})
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
	if _, err := conn.Write(fc.bytes); err != nil {
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
	wait := time.Duration(0) // a crash closes the connection, then dies
	if c.Closed {
		wait = deathWait
	}
	e.survived(&c, wait)
	e.nextCall(&c)
	return c
}

// nextCall has a new client call after case c, if the server survived it.
func (e *env) nextCall(c *Case) {
	if c.Survived {
		call := oneCall(e.ctx, e.t.Addr, []byte("after "+c.Name), callDeadline)
		c.Next = &call
	}
}

// runChecksumClient runs `sluice call` against a server answering with
// each crash frame in turn.
func runChecksumClient(e *env) error {
	for _, r := range []struct {
		name string
		frag tframe.Fragment
	}{
		{"call res, checksum type 4", tframe.Fragment{ChecksumType: 4, Checksum: make([]byte, 4), Chunks: [][]byte{nil, nil, []byte("x")}}},
		{"call res, no argument chunk", tframe.Fragment{}},
	} {
		hs, err := startRawServer(func(ids <-chan uint32, write func([]byte) error) {
			for id := range ids {
				write(tframe.AppendCallRes(nil, id, tframe.Call{Headers: callHeaders("raw"), Fragment: r.frag}))
			}
		})
		if err != nil {
			return err
		}
		run, err := e.runSluice(clientLimit, nil, "call", "-p", hs.addr(), "-s", Service, "-m", MethodEcho, "-e", "raw", "-r", "x",
			"--timeout", clientTimeout.String())
		hs.close()
		if err != nil {
			return err
		}
		note := run.stderr.last()
		if run.err == nil {
			note = "the call succeeded"
		}
		e.r.Cases = append(e.r.Cases, run.clientCase(r.name, note, fmt.Sprintf(" (%d call req(s) answered)", hs.callReqs.Load())))
	}
	e.r.caseFigures()
	return nil
}

type sluiceRun struct {
	limit  time.Duration
	took   time.Duration
	exit   int // -1 if it did not exit
	err    error
	killed bool // it ran past limit
	stdout headBuffer
	stderr stderrWatch
	state  *os.ProcessState
}

// runSluice runs the sluice binary with args, killing it after limit;
// started, if not nil, is called with its pid once it runs.
func (e *env) runSluice(limit time.Duration, started func(pid int), args ...string) (*sluiceRun, error) {
	bin, err := e.bin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(e.ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), ChildEnv+"=")
	r := &sluiceRun{limit: limit, exit: -1}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	cmd.WaitDelay = procExitLimit // a grandchild holding the pipes open
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	r.err = cmd.Wait()
	r.took, r.killed, r.state = time.Since(start), ctx.Err() != nil, cmd.ProcessState
	if r.state != nil {
		r.exit = r.state.ExitCode()
	}
	return r, nil
}

// clientCase is the case of a client run, note and suffix its note
// unless it crashed or was killed.
func (r *sluiceRun) clientCase(name, note, suffix string) Case {
	c := Case{Name: name, Client: true, After: millis.Duration(r.took), Exit: r.exit, Crash: r.stderr.crash(), Note: note}
	c.Survived = c.Crash == "" && !r.killed
	switch {
	case r.killed:
		c.Note = fmt.Sprintf("still running after %v, killed", r.limit)
	case c.Crash != "":
		c.Note = ""
	}
	c.Note += suffix
	return c
}

// sent is a call written on a connection while its answer was read.
type sent struct {
	a        answer
	err      error         // reading the answer
	after    time.Duration // from the first write to the answer
	werr     error         // writing the call
	written  int64         // bytes written in all
	answered int64         // bytes written when the answer came
}

// send writes spec on conn, each frame within writeLimit, reading its
// answer within readLimit.
func send(conn *rawConn, spec callSpec, readLimit, writeLimit time.Duration) sent {
	var written atomic.Int64
	var s sent
	answered := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(answered)
		s.a, s.err = conn.readAnswer(spec.id, readLimit)
		s.after, s.answered = time.Since(start), written.Load()
	}()
	werr := spec.frames(func(f []byte, _ bool) error {
		conn.SetWriteDeadline(time.Now().Add(writeLimit))
		n, err := conn.Write(f)
		written.Add(int64(n))
		return err
	})
	conn.SetWriteDeadline(time.Time{})
	<-answered // bounded by readLimit
	s.werr, s.written = werr, written.Load()
	return s
}

// runBigArgs sends a 10 MB and a 100 MB arg3 on one connection, each
// followed by a normal call on it.
func runBigArgs(e *env) error {
	var conn *rawConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	id := uint32(1)
	for _, size := range []int{10_000_000, 100_000_000} {
		if !e.t.Alive() {
			break
		}
		if conn == nil {
			var err error
			if conn, err = dialHandshaken(e.ctx, e.t.Addr, net.Dialer{}); err != nil {
				return err
			}
		}
		id += 2
		c := Case{Name: fmt.Sprintf("%d MB arg3 (%d bytes)", size/1_000_000, size)}
		arg3 := make([]byte, size)
		s := send(conn, echoCall(id, bigLimit, arg3), bigLimit, bigWriteLimit)
		s.toCase(&c)
		if s.err == nil && s.a.errMsg == "" && s.a.code == 0 && !bytes.Equal(s.a.args[2], arg3) {
			c.Note = fmt.Sprintf("echo answered %d bytes of %d", len(s.a.args[2]), size)
		}
		c.Note = joinNote(c.Note, fmt.Sprintf("%s MiB of %s MiB written when the answer came", mb(s.answered), mb(s.written)))
		if s.werr != nil {
			c.Note = joinNote(c.Note, "writing stopped: "+s.werr.Error())
			c.Closed = c.Closed || !isTimeout(s.werr)
		}
		e.survived(&c, deathWait)
		if c.Closed {
			conn.Close()
			conn = nil
		} else if e.t.Alive() {
			id += 2
			next := sameConnCall(conn, id, []byte("after the big call"), callDeadline)
			c.Next = &next
		}
		e.r.Cases = append(e.r.Cases, c)
	}
	e.r.caseFigures()
	return e.end(nil, 0)
}

// toCase records the answer in c.
func (s sent) toCase(c *Case) {
	switch {
	case errors.Is(s.err, errClosed):
		c.Closed, c.After = true, millis.Duration(s.after)
	case s.err != nil:
		c.Note = "no answer: " + s.err.Error()
	default:
		c.Answer, c.After = s.a.String(), millis.Duration(s.after)
	}
}

// sameConnCall makes a small echo call on conn and reads its answer.
func sameConnCall(conn *rawConn, id uint32, arg3 []byte, limit time.Duration) Call {
	s := send(conn, echoCall(id, limit, arg3), limit, limit)
	c, a := Call{Latency: millis.Duration(s.after)}, s.a
	switch {
	case s.werr != nil:
		c.Code, c.Err = "NETWORK", s.werr.Error()
	case errors.Is(s.err, errClosed):
		c.Code, c.Err = "CLOSED", s.err.Error()
	case s.err != nil:
		c.Code, c.Err = "TIMEOUT", s.err.Error()
	case a.errMsg != "":
		c.Code, c.Err = a.errCode.String(), a.errMsg
	case a.code != 0:
		c.Code, c.Err = "APPLICATION", string(a.args[2])
	case !bytes.Equal(a.args[2], arg3):
		c.Code, c.Err = "WRONG", fmt.Sprintf("echo answered %q", a.args[2])
	default:
		c.OK = true
	}
	return c
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// runHeaders sends, each on a new connection, a JSON call with 100,000
// headers and raw calls with a big arg2.
func runHeaders(e *env) error {
	hs := make([]string, 100_000)
	for i := range hs {
		hs[i] = `"h` + strconv.Itoa(i) + `":"v"`
	}
	h := []byte("{" + strings.Join(hs, ",") + "}")
	cases := []struct {
		name       string
		scheme     string
		arg2, arg3 []byte
	}{
		{fmt.Sprintf("JSON call, 100,000 headers (%s MiB arg2)", mb(int64(len(h)))), "json", h, []byte("{}")},
		{"raw call, 3 MB arg2", "raw", make([]byte, 3_000_000), []byte("x")},
		{"raw call, 8 MB arg2", "raw", make([]byte, 8_000_000), []byte("x")},
	}
	for i, tc := range cases {
		if !e.t.Alive() {
			break
		}
		conn, err := dialHandshaken(e.ctx, e.t.Addr, net.Dialer{})
		if err != nil {
			return err
		}
		c := Case{Name: tc.name}
		spec := callSpec{id: uint32(2*i + 3), ttl: bigLimit, scheme: tc.scheme, arg2: tc.arg2, arg3: tc.arg3}
		s := send(conn, spec, bigLimit, bigWriteLimit)
		s.toCase(&c)
		c.After = millis.Duration(s.after)
		if s.err == nil && s.a.errMsg == "" {
			c.Answer += fmt.Sprintf(", arg2 of %s MiB echoed", mb(int64(len(s.a.args[1]))))
		}
		if s.werr != nil {
			c.Note = joinNote(c.Note, "writing stopped: "+s.werr.Error())
		}
		conn.Close()
		e.survived(&c, deathWait)
		e.nextCall(&c)
		e.r.Cases = append(e.r.Cases, c)
	}
	e.r.caseFigures()
	return e.end(nil, 0)
}

// maxClientStdout bounds a client run's kept stdout (a bench report fits).
const maxClientStdout = 16 << 20

// headBuffer keeps the first maxClientStdout bytes written to it: a
// client a hostile server shapes cannot make the runner hold more.
type headBuffer struct{ b []byte }

func (h *headBuffer) Write(p []byte) (int, error) {
	h.b = append(h.b, p[:min(len(p), max(0, maxClientStdout-len(h.b)))]...)
	return len(p), nil
}

func (h *headBuffer) String() string { return string(h.b) }
