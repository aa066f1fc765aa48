package hostile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

const (
	// bigAnswersLimit bounds the client's life; bigAnswersTimeout each call.
	bigAnswersLimit   = 3 * time.Minute
	bigAnswersTimeout = time.Minute
	clientRSSFigure   = "client peak RSS MiB"
)

// runBigAnswersClient runs `sluice bench` against a hostile server that
// answers all its calls in flight at once, frames interleaved, and
// measures the client's peak resident memory.
func runBigAnswersClient(e *env) error {
	calls, size := bigAnswers, e.p.bigAnswerSize
	bs := &bigAnswerServer{size: size}
	var err error
	if bs.rawServer, err = startRawServer(bs.answer); err != nil {
		return err
	}
	defer bs.close()
	e.logf("`sluice bench`: %d calls in flight, each answered %d bytes", calls, size)
	var s *sampler
	run, err := e.runSluice(bigAnswersLimit, func(pid int) { s = startSampler(e.ctx, pid, "", 50*time.Millisecond, 0) }, "bench", "-p", bs.addr(), "-s", Service, "-m", MethodEcho, "-e", "raw", "-r", "x", "--connections", "1",
		"--concurrency", fmt.Sprint(calls), "-n", fmt.Sprint(calls), "--warmup", "0", "--timeout", bigAnswersTimeout.String(), "-o", "json",
		// No first call before the run (bench makes one as yab does): its
		// answer would be a call more, held for the report, whose JSON
		// would carry it whole, base64.
		"--no-first-response")
	if err != nil {
		return err
	}
	peak, _ := s.finish()
	if run.state != nil {
		peak = max(peak, maxRSS(run.state))
	}
	e.r.Cases = append(e.r.Cases, run.clientCase(fmt.Sprintf("%d answers of %d MB", calls, size/1_000_000),
		benchSummary(run.stdout.String(), run.stderr.last()), fmt.Sprintf(" (%d answers begun)", bs.n.Load())))
	e.r.caseFigures()
	if peak > 0 {
		e.r.fig(clientRSSFigure, "%s", mb(peak))
	} else {
		e.r.problem("the client's peak resident memory could not be read")
	}
	return nil
}

// benchSummary sums up `sluice bench -o json`'s report.
func benchSummary(stdout, lastErr string) string {
	var rep struct {
		Calls, OK, Failed int
		Errors            map[string]int
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		return "no report: " + lastErr
	}
	s := fmt.Sprintf("%d calls: %d ok, %d failed", rep.Calls, rep.OK, rep.Failed)
	for _, k := range slices.Sorted(maps.Keys(rep.Errors)) {
		s += fmt.Sprintf(", %d %s", rep.Errors[k], k)
	}
	return s
}

// bigAnswerServer is a hostile TChannel server: it gathers bigAnswers
// call requests on a connection (or those of bigAnswerGather from the
// first) and answers them together, size bytes of arg3 each, frames
// interleaved.
type bigAnswerServer struct {
	*rawServer
	size int
	n    atomic.Int64 // answers begun
}

// bigAnswerGather is how long a batch waits for calls after its first.
const bigAnswerGather = time.Second

// answer answers the calls of ids in batches until ids is closed or a
// write fails.
func (s *bigAnswerServer) answer(ids <-chan uint32, write func([]byte) error) {
	for id := range ids {
		batch, gathered := []uint32{id}, time.After(bigAnswerGather)
	gather:
		for len(batch) < bigAnswers {
			select {
			case id, ok := <-ids:
				if !ok {
					break gather
				}
				batch = append(batch, id)
			case <-gathered:
				break gather
			}
		}
		s.n.Add(int64(len(batch)))
		if err := s.interleave(batch, write); err != nil {
			for range ids { // the client left: let the reader finish
			}
			return
		}
	}
}

// interleave writes the answers to batch, one frame of each in turn: a
// call response with the start of arg3, then continuations.
func (s *bigAnswerServer) interleave(batch []uint32, write func([]byte) error) error {
	const first = 1024                                      // arg3 bytes in the call response frame
	chunk := tframe.MaxSize - tframe.HeaderSize - 1 - 1 - 2 // flags, checksum type, chunk length
	filler := bytes.Repeat([]byte("x"), chunk)
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
