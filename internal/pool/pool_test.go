package pool

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

func TestConnectConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  ConnectConfig
		want string
	}{
		{ConnectConfig{Timeout: -1}, "channel: ConnectConfig.Timeout is -1ns, must be >= 0"},
		{ConnectConfig{Backoff: backoff.Exponential{Initial: time.Second}}, "channel: ConnectConfig.Backoff.Max is 0s, must be >= Initial (1s)"},
		{ConnectConfig{Backoff: backoff.Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 0.5}}, "Multiplier is 0.5, must be a finite number >= 1"},
		{ConnectConfig{Backoff: backoff.Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2, Spread: 1}}, "Spread is 1, must be in [0, 1)"},
		{ConnectConfig{Backoff: backoff.Exponential{Initial: time.Second, Max: time.Minute, Multiplier: 2}}, "Jitter is full, must be proportional"},
		{ConnectConfig{HealthCheck: HealthCheck{Interval: time.Second}}, "channel: ConnectConfig.HealthCheck.Timeout is 0s, must be > 0"},
		{ConnectConfig{HealthCheck: HealthCheck{Interval: time.Second, Timeout: time.Second}}, "channel: ConnectConfig.HealthCheck.Failures is 0, must be >= 1"},
		{ConnectConfig{HealthCheck: HealthCheck{Timeout: time.Second, Failures: 1}}, "channel: ConnectConfig.HealthCheck.Interval is 0s, must be > 0"},
		{ConnectConfig{HealthCheck: HealthCheck{Interval: time.Second, Disabled: true}}, "channel: ConnectConfig.HealthCheck.Disabled is true, must have Interval, Timeout and Failures 0"},
		{ConnectConfig{Budget: ConnectBudget{Rate: -1}}, "channel: ConnectConfig.Budget.Rate is -1, must be 0 or a finite number >= 0.001"},
		{ConnectConfig{Budget: ConnectBudget{Rate: 1, Disabled: true}}, "channel: ConnectConfig.Budget.Disabled is true, must have Rate and Burst 0"},
	} {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
		if _, err := New(Config{Connect: tt.cfg}); err == nil {
			t.Errorf("New accepted %+v", tt.cfg)
		}
	}
	for _, ok := range []ConnectConfig{{}, {HealthCheck: HealthCheck{Disabled: true}}, {Budget: ConnectBudget{Disabled: true}},
		{Backoff: DefaultConnectBackoff(), HealthCheck: DefaultHealthCheck()}} {
		if err := ok.Validate(); err != nil {
			t.Error(err)
		}
	}
}

// An abort closes the socket of a connect whose handshake answer has not
// been read whole, and leaves open one whose answer has: tchannel-go may
// already have given that connection to a call, which the connector's
// graceful close lets finish. The answer's last bytes, read as an abort
// closes the socket, fail the read rather than make a connection.
func TestAbortClosesOnlyAHandshakeInProgress(t *testing.T) {
	answer := make([]byte, 40) // a 40-byte first frame: its size field, then the rest
	answer[1] = 40
	connect := func(t *testing.T, sent []byte) (*watch, net.Conn, net.Conn) {
		t.Helper()
		ours, theirs := net.Pipe()
		t.Cleanup(func() { ours.Close(); theirs.Close() })
		w := newWatch(nil)
		nc := w.wrap(ours)
		go theirs.Write(sent)
		if _, err := io.ReadFull(nc, make([]byte, len(sent))); err != nil {
			t.Fatal(err)
		}
		return w, nc, theirs
	}

	t.Run("answer cut", func(t *testing.T) {
		w, nc, _ := connect(t, answer[:39])
		w.abort()
		if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("a read after the abort: %v; want the socket closed", err)
		}
	})
	t.Run("size field below a header", func(t *testing.T) {
		w, nc, _ := connect(t, []byte{0, 2}) // tchannel-go waits for 14 more header bytes
		w.abort()
		if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("a read after the abort: %v; want the socket closed", err)
		}
	})
	t.Run("answer whole", func(t *testing.T) {
		w, nc, theirs := connect(t, answer)
		w.abort()
		go theirs.Write([]byte("frame"))
		if _, err := io.ReadFull(nc, make([]byte, 5)); err != nil {
			t.Fatalf("the connection after the abort: %v; want it open", err)
		}
	})
	t.Run("answer read as the abort closes", func(t *testing.T) {
		w := newWatch(nil)
		w.abort()
		if err := w.readAnswer(answer); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("readAnswer after an abort: %v; want net.ErrClosed", err)
		}
		if w.handshook.Load() {
			t.Fatal("an answer read after the abort counts as the handshake's")
		}
	})
}

// Guards coalescing Changed: a burst of changes other than to Ready
// closes it at most once per notifyGap (and the first at once), whatever
// the machine's speed; a change to Ready closes it at once even while a
// coalesced close is due; and a coalesced change is not lost. Without the
// coalescing every change closes it, and each close sends every waiter
// (calls waiting for a peer, the channel's watch on failing peers) over
// the whole list: the 1,000 changes below would close it 1,000 times.
func TestChangedCoalesced(t *testing.T) {
	pool, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.nconns.Store(coalesceAbove + 1) // a large pool's: a small one's changes are not coalesced
	closes := 0
	ch := pool.Changed()
	start := time.Now()
	for range 1000 {
		pool.Notify(false)
		if c := pool.Changed(); c != ch {
			closes++
			ch = c
		}
	}
	if bound := int(time.Since(start)/notifyGap) + 2; closes > bound {
		t.Errorf("1,000 changes closed Changed %d times in %v, want at most %d (one per %v)", closes, time.Since(start), bound, notifyGap)
	}

	pool.Notify(false) // a coalesced close may be due
	before := pool.Changed()
	pool.Notify(true)
	select {
	case <-before:
	default:
		t.Fatal("a change to Ready did not close Changed at once")
	}

	c := pool.Changed()
	pool.Notify(false) // within notifyGap of the last close: coalesced
	testwait.Recv(t, c, "Changed to close for a coalesced change")
}

// In a pool of at most coalesceAbove connections every change closes
// Changed at once: a call waiting for a peer of a small list learns at
// once that the last one failed, and fails fast rather than notifyGap
// late.
func TestChangedAtOnceInASmallPool(t *testing.T) {
	pool, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.nconns.Store(coalesceAbove)
	for i := range 100 {
		before := pool.Changed()
		pool.Notify(false)
		select {
		case <-before:
		default:
			t.Fatalf("change %d (not to Ready) in a pool of %d connections did not close Changed at once", i, coalesceAbove)
		}
	}
}

// The bucket's arithmetic: Burst connects at once, then one per 1/Rate, in
// the order asked; an urgent connect starts at once and delays the
// others by its turn; a refunded turn goes to the next; an idle budget
// fills up again.
func TestConnectBudgetTurns(t *testing.T) {
	b := newConnectBudget(ConnectBudget{Rate: 10, Burst: 3}.withDefaults())
	t0 := time.Unix(1_700_000_000, 0)
	want := func(at time.Time, urgent bool, wait time.Duration) {
		t.Helper()
		if got := b.reserve(at, urgent).Sub(at); got != wait {
			t.Fatalf("reserve at +%v (urgent %v): wait %v, want %v", at.Sub(t0), urgent, got, wait)
		}
	}
	for range 3 {
		want(t0, false, 0)
	}
	want(t0, false, 100*time.Millisecond)
	want(t0, false, 200*time.Millisecond)
	want(t0, true, 0)                     // urgent: at once...
	want(t0, false, 400*time.Millisecond) // ...and counted
	b.refund(t0)
	want(t0, false, 400*time.Millisecond) // the refunded turn, reused
	want(t0.Add(10*time.Second), false, 0)
	want(t0.Add(10*time.Second), false, 0)
	want(t0.Add(10*time.Second), false, 0)
	want(t0.Add(10*time.Second), false, 100*time.Millisecond)

	if newConnectBudget(ConnectBudget{Disabled: true}.withDefaults()) != nil {
		t.Error("a disabled budget made a budget, want none")
	}
	for _, bad := range []ConnectBudget{{Burst: -1}, {Rate: 1e-9}, {Rate: -1}} {
		if err := (ConnectConfig{Budget: bad}).Validate(); err == nil {
			t.Errorf("ConnectConfig{Budget: %+v}.Validate() = nil, want an error", bad)
		}
	}
}
