package channel

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/internal/testkit/tpeer"
	"github.com/sluice-rpc/sluice/internal/tframe"
)

// lineRecorder is a tchannel-go logger that keeps every line at Info
// and above, with its fields.
type lineRecorder struct {
	mu     *sync.Mutex
	lines  *[]line
	fields tchannel.LogFields
}

type line struct {
	level  string
	msg    string
	fields tchannel.LogFields
}

func newLineRecorder() lineRecorder {
	return lineRecorder{mu: &sync.Mutex{}, lines: new([]line)}
}

func (l lineRecorder) add(level, msg string) {
	l.mu.Lock()
	*l.lines = append(*l.lines, line{level, msg, l.fields})
	l.mu.Unlock()
}

func (l lineRecorder) Enabled(tchannel.LogLevel) bool { return true }
func (l lineRecorder) Fatal(msg string)               { l.add("fatal", msg) }
func (l lineRecorder) Error(msg string)               { l.add("error", msg) }
func (l lineRecorder) Warn(msg string)                { l.add("warn", msg) }
func (l lineRecorder) Info(msg string)                { l.add("info", msg) }
func (l lineRecorder) Infof(msg string, args ...any)  { l.add("info", fmt.Sprintf(msg, args...)) }
func (l lineRecorder) Debug(msg string)               { l.add("debug", msg) }
func (l lineRecorder) Debugf(msg string, args ...any) { l.add("debug", fmt.Sprintf(msg, args...)) }
func (l lineRecorder) Fields() tchannel.LogFields     { return l.fields }
func (l lineRecorder) WithFields(f ...tchannel.LogField) tchannel.Logger {
	return lineRecorder{mu: l.mu, lines: l.lines, fields: append(append(tchannel.LogFields(nil), l.fields...), f...)}
}

// of returns the lines of msg, and the suppressedBefore field of each (0
// when absent).
func (l lineRecorder) of(msg string) (n int, suppressed []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ln := range *l.lines {
		if ln.msg != msg {
			continue
		}
		n++
		var s int64
		for _, f := range ln.fields {
			if f.Key == "suppressedBefore" {
				s = f.Value.(int64)
			}
		}
		suppressed = append(suppressed, s)
	}
	return n, suppressed
}

// fakeNow is a clock for the log budgets that moves only when told.
type fakeNow struct{ ns atomic.Int64 }

func (f *fakeNow) now() time.Time              { return time.Unix(0, f.ns.Load()) }
func (f *fakeNow) add(d time.Duration)         { f.ns.Add(int64(d)) }
func withLogClock(now func() time.Time) Option { return func(o *options) { o.logNow = now } }

// Per message and level: LogBurst lines at once, then LogLinesPerSecond;
// the next line written after some were left out counts them; loggers
// made by WithFields share the budget; Debug and other messages have
// their own.
func TestLimitedLogger(t *testing.T) {
	rec := newLineRecorder()
	clk := &fakeNow{}
	clk.add(time.Hour)
	l := newLimitedLogger(rec, clk.now)
	for i := 0; i < 100; i++ {
		l.WithFields(tchannel.LogField{Key: "i", Value: i}).Warn("bad frame")
		l.Info("bad frame") // another level: its own budget
		l.Error("other")
		l.Infof("value %d", i) // budgeted by its format
		l.Debug("debug")
	}
	for msg, want := range map[string]int{"bad frame": 2 * LogBurst, "other": LogBurst, "debug": 100} {
		if n, _ := rec.of(msg); n != want {
			t.Errorf("%q: %d lines, want %d", msg, n, want)
		}
	}
	clk.add(time.Second)
	for i := 0; i < 100; i++ {
		l.Error("other")
	}
	n, s := rec.of("other")
	if n != LogBurst+LogLinesPerSecond {
		t.Errorf("after a second: %d lines, want %d", n, LogBurst+LogLinesPerSecond)
	}
	if s[LogBurst] != 100-LogBurst {
		t.Errorf("the first line after a second says %d suppressed, want %d", s[LogBurst], 100-LogBurst)
	}
	// Messages past maxLogMessages share one budget.
	for i := 0; i < maxLogMessages+100; i++ {
		l.Warn(fmt.Sprintf("message %d", i))
	}
	total := 0
	for i := 0; i < maxLogMessages+100; i++ {
		n, _ := rec.of(fmt.Sprintf("message %d", i))
		total += n
	}
	if want := maxLogMessages - 4 + LogBurst; total != want { // 4 (level, message) pairs have budgets already
		t.Errorf("%d lines of distinct messages, want %d", total, want)
	}
}

// A peer that sends a server thousands of frames tchannel-go logs (an
// error frame for an exchange that does not exist: a line at Info each)
// gets LogBurst of them into the user's logger, and the next line after
// a second says how many were left out.
func TestPeerCannotFloodTheLog(t *testing.T) {
	const msg = "Received frame for unknown message exchange."
	const frames = 2000
	rec := newLineRecorder()
	clk := &fakeNow{}
	s := startServer(t, WithTChannelOptions(tchannel.ChannelOptions{Logger: rec}), withLogClock(clk.now))
	p := tpeer.Dial(t, s.ch.HostPort())
	p.Handshake()
	// ping sends a ping and waits for its answer: tchannel-go reads a
	// connection's frames in order, so every frame before it was handled.
	ping := func(id uint32) {
		t.Helper()
		p.Send(tframe.Append(nil, tframe.PingReq, id, nil))
		for {
			if f := p.Next(); f.Type == tframe.PingRes {
				return
			}
		}
	}
	for i := 0; i < frames; i++ {
		p.Send(tframe.AppendError(nil, uint32(100+i), byte(tchannel.ErrCodeUnexpected), "no such call"))
	}
	ping(1)
	if n, _ := rec.of(msg); n != LogBurst {
		t.Fatalf("%d error frames for unknown exchanges made %d log lines, want %d (LogBurst)", frames, n, LogBurst)
	}
	clk.add(time.Second)
	p.Send(tframe.AppendError(nil, 99, byte(tchannel.ErrCodeUnexpected), "no such call"))
	ping(2)
	n, sup := rec.of(msg)
	if n != LogBurst+1 || sup[LogBurst] != frames-LogBurst {
		t.Errorf("a second later: %d lines, the last saying %v suppressed; want %d lines, the last saying %d", n, sup[len(sup)-1], LogBurst+1, frames-LogBurst)
	}
}
