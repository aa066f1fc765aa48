package hostile

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tools/internal/childproc"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// bigAnswers is the size of big-answers-client: calls in flight at once,
// and the bytes of each one's answer (arg3). Full is the report's attack:
// 40 answers of 67 MB, each under the client's 64 MiB limit on one
// response (67,108,864 bytes), 2.68 GB in all.
func bigAnswers(s Size) (calls, size int) {
	if s == CI {
		return 40, 16_000_000
	}
	return 40, 67_000_000
}

// bigAnswersLimit bounds the client's whole life; bigAnswersTimeout is
// each call's deadline, long enough for a client that reads every answer.
const (
	bigAnswersLimit   = 3 * time.Minute
	bigAnswersTimeout = time.Minute
)

// runBigAnswersClient runs `sluice bench` with calls in flight on one
// Channel against a hostile server that answers them all at once, their
// frames interleaved, each with an answer just under the client's limit
// on one response, and measures the client's peak resident memory.
func runBigAnswersClient(e *env) error {
	calls, size := bigAnswers(e.cfg.Size)
	bs, err := startBigAnswerServer(calls, size)
	if err != nil {
		return err
	}
	defer bs.close()
	bin, err := e.bin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, bigAnswersLimit)
	defer cancel()
	p, err := startProc(childproc.Config{Env: ChildEnv + "=", Command: []string{bin, "bench", "-p", bs.addr(), "-s", Service,
		"-m", MethodEcho, "-e", "raw", "-r", "x", "--connections", "1", "--concurrency", fmt.Sprint(calls),
		"-n", fmt.Sprint(calls), "--warmup", "0", "--timeout", bigAnswersTimeout.String(), "-o", "json"}})
	if err != nil {
		return fmt.Errorf("start the client %s: %w", bin, err)
	}
	defer context.AfterFunc(ctx, func() { p.Process().Kill() })()
	e.logf("client %s (pid %d): %d calls in flight, each answered %d bytes", bin, p.Pid(), calls, size)
	var out strings.Builder
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		for l := range p.lines {
			out.WriteString(l)
			out.WriteByte('\n')
		}
	}()
	start := time.Now()
	sampled := sampleClientRSS(p, 50*time.Millisecond)
	<-lines
	p.Wait(procExitLimit)
	after := time.Since(start)
	c := Case{Name: fmt.Sprintf("%d answers of %d MB", calls, size/1_000_000), Client: true, After: millis.Duration(after), Exit: -1}
	peak := sampled()
	if st := p.ProcessState(); st != nil {
		c.Exit = st.ExitCode()
		peak = max(peak, maxRSS(st))
	}
	c.Crash = p.stderr.crash()
	c.Survived = c.Crash == "" && ctx.Err() == nil
	switch {
	case ctx.Err() != nil:
		c.Note = fmt.Sprintf("still running after %v, killed", bigAnswersLimit)
	case c.Crash != "":
	default:
		c.Note = benchSummary(out.String(), p.stderr.last())
	}
	c.Note += fmt.Sprintf(" (%d answers begun)", bs.answered())
	p.stop()
	e.r.Cases = append(e.r.Cases, c)
	e.r.caseFigures()
	if peak > 0 {
		e.r.fig(clientRSSFigure, "%s", mb(peak))
	} else {
		e.r.problem("the client's peak resident memory could not be read")
	}
	return nil
}

// clientRSSFigure names big-answers-client's figure of the client's peak
// resident memory, in MiB.
const clientRSSFigure = "client peak RSS MiB"

// sampleClientRSS samples p's resident memory every d until it exits; the
// function it returns waits for that and returns the peak seen.
func sampleClientRSS(p *proc, d time.Duration) func() int64 {
	done := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			if rss, err := readRSS(p.Pid()); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-p.Exited():
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { return <-done }
}

// benchSummary sums up `sluice bench -o json`'s report: calls that
// succeeded and failed, and the failures by error.
func benchSummary(stdout, lastErr string) string {
	var rep struct {
		Calls  int            `json:"calls"`
		OK     int            `json:"ok"`
		Failed int            `json:"failed"`
		Errors map[string]int `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		return "no report: " + lastErr
	}
	s := fmt.Sprintf("%d calls: %d ok, %d failed", rep.Calls, rep.OK, rep.Failed)
	keys := make([]string, 0, len(rep.Errors))
	for k := range rep.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s += fmt.Sprintf(", %d %s", rep.Errors[k], k)
	}
	return s
}

// bigAnswerServer is a hostile TChannel server: it answers the init
// handshake and pings, waits until calls call requests have come on a
// connection (or a second has passed since the first), and then answers
// them all at once, size bytes of arg3 each, one frame of each in turn, so
// that every answer is in flight at the client together.
type bigAnswerServer struct {
	*rawServer
	calls, size int
	n           int // answers begun; rawServer.mu
}

func startBigAnswerServer(calls, size int) (*bigAnswerServer, error) {
	rs, err := listenRaw()
	if err != nil {
		return nil, err
	}
	s := &bigAnswerServer{rawServer: rs, calls: calls, size: size}
	rs.start(s.serve)
	return s, nil
}

func (s *bigAnswerServer) answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// bigAnswerGather is how long the server waits for more calls after the
// first of a batch.
const bigAnswerGather = time.Second

// serve reads one connection's frames until it closes; a writer answers
// the calls in batches.
func (s *bigAnswerServer) serve(c net.Conn) {
	defer c.Close()
	ids := make(chan uint32, s.calls)
	var wmu sync.Mutex // one writer at a time: the answers, or a handshake or ping reply
	write := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := c.Write(b)
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.answer(ids, write)
	}()
	defer func() {
		close(ids)
		<-done
	}()
	rc := &rawConn{Conn: c, r: bufio.NewReader(c)}
	for {
		h, _, err := rc.readFrame()
		if err != nil {
			return
		}
		if h.Type == tframe.CallReq {
			ids <- h.ID
			continue
		}
		out := s.handshakeReply(h)
		if out == nil {
			continue
		}
		if err := write(out); err != nil {
			return
		}
	}
}

// answer gathers call ids into batches and answers each batch's calls
// together, until ids is closed or a write fails.
func (s *bigAnswerServer) answer(ids <-chan uint32, write func([]byte) error) {
	for {
		id, ok := <-ids
		if !ok {
			return
		}
		batch := []uint32{id}
		t := time.NewTimer(bigAnswerGather)
	gather:
		for len(batch) < s.calls {
			select {
			case id, ok := <-ids:
				if !ok {
					break gather
				}
				batch = append(batch, id)
			case <-t.C:
				break gather
			}
		}
		t.Stop()
		s.mu.Lock()
		s.n += len(batch)
		s.mu.Unlock()
		if err := s.interleave(batch, write); err != nil {
			for range ids { // the client left: let the reader finish
			}
			return
		}
	}
}

// interleave writes the answers to the calls of batch, one frame of each
// in turn: a call response with an empty arg1 and arg2 and the start of
// arg3, then continuation frames of arg3 filler, the last without the
// more-fragments flag.
func (s *bigAnswerServer) interleave(batch []uint32, write func([]byte) error) error {
	const first = 1024                                      // arg3 bytes in the call response frame
	chunk := tframe.MaxSize - tframe.HeaderSize - 1 - 1 - 2 // flags, checksum type, chunk length
	filler := make([]byte, chunk)
	for i := range filler {
		filler[i] = 'x'
	}
	cont := tframe.AppendContinue(nil, tframe.CallResContinue, 0, tframe.Fragment{More: true, Chunks: [][]byte{filler}})
	left := s.size - first
	for _, id := range batch {
		f := tframe.AppendCallRes(nil, id, tframe.Call{Headers: callHeaders("raw"),
			Fragment: tframe.Fragment{More: true, Chunks: [][]byte{nil, nil, filler[:first]}}})
		if err := write(f); err != nil {
			return err
		}
	}
	for ; left > 0; left -= chunk {
		frame := cont
		if left <= chunk {
			frame = tframe.AppendContinue(nil, tframe.CallResContinue, 0, tframe.Fragment{Chunks: [][]byte{filler[:left]}})
		}
		for _, id := range batch {
			binary.BigEndian.PutUint32(frame[4:8], id)
			if err := write(frame); err != nil {
				return err
			}
		}
	}
	return nil
}
