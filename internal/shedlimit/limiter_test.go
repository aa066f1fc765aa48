package shedlimit

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/shed"
)

var t0 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func newLimiter(t testing.TB, mod func(*shed.Config)) *Limiter {
	t.Helper()
	cfg := shed.Config{Clock: clock.NewFake(t0)}
	if mod != nil {
		mod(&cfg)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// probe runs l's probe to its end at time now: ProbeSamples requests, one
// at a time, each taking rtts[i%len(rtts)]. It returns the time after.
func probe(t *testing.T, l *Limiter, now time.Time, rtts ...time.Duration) time.Time {
	t.Helper()
	if !l.State().Probing {
		t.Fatal("not probing")
	}
	for i := 0; i < l.cfg.ProbeSamples; i++ {
		tok, ok := l.AcquireAt(now)
		if !ok {
			t.Fatalf("probe request %d refused", i)
		}
		now = now.Add(rtts[i%len(rtts)])
		l.ReleaseAt(tok, now)
	}
	if l.State().Probing {
		t.Fatal("probe did not end after ProbeSamples requests")
	}
	return now
}

// window runs one window of requests at time now: inFlight requests admitted
// together, each taking rtt, repeated until a Window has passed. It returns
// the time after.
func window(t *testing.T, l *Limiter, now time.Time, inFlight int, rtt time.Duration) time.Time {
	t.Helper()
	end := now.Add(l.cfg.Window)
	for now.Before(end) {
		toks := make([]Token, inFlight)
		for i := range toks {
			tok, ok := l.AcquireAt(now)
			if !ok {
				t.Fatalf("request %d of %d refused at limit %d", i+1, inFlight, l.Limit())
			}
			toks[i] = tok
		}
		now = now.Add(rtt)
		for _, tok := range toks {
			l.ReleaseAt(tok, now)
		}
	}
	return now
}

func TestStartsWithAProbe(t *testing.T) {
	l := newLimiter(t, nil)
	if got := l.Limit(); got != shed.DefaultProbeLimit {
		t.Fatalf("limit at start %d, want the probe limit %d", got, shed.DefaultProbeLimit)
	}
	var toks []Token
	for i := 0; i < shed.DefaultProbeLimit; i++ {
		tok, ok := l.AcquireAt(t0)
		if !ok {
			t.Fatalf("request %d refused", i+1)
		}
		toks = append(toks, tok)
	}
	if _, ok := l.AcquireAt(t0); ok {
		t.Fatal("a request beyond the probe limit was admitted")
	}
	for _, tok := range toks {
		l.ReleaseAt(tok, t0.Add(time.Millisecond))
	}
	// The median of 1ms (x3), 2ms, ... is what the probe settles on.
	now := probe(t, l, t0.Add(time.Millisecond), 2*time.Millisecond, 3*time.Millisecond, 2*time.Millisecond)
	s := l.State()
	// 3 samples of 1 ms and 22 alternating 2,3,2 ms: the median is 2 ms.
	if s.NoLoadLatency != 2*time.Millisecond {
		t.Errorf("no-load latency %v, want 2ms (the probe's median)", s.NoLoadLatency)
	}
	if s.Limit != shed.DefaultInitialLimit || s.Probing {
		t.Errorf("after the probe: limit %d probing %v, want %d and false", s.Limit, s.Probing, shed.DefaultInitialLimit)
	}
	_ = now
}

func TestRequestsFromBeforeAProbeDoNotMeasureIt(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.ProbeSamples = 1 })
	now := probe(t, l, t0, time.Millisecond)
	old, _ := l.AcquireAt(now)
	// Make the next probe due, and start it with a window.
	now = now.Add(2 * shed.DefaultProbeInterval)
	tok, _ := l.AcquireAt(now)
	l.ReleaseAt(tok, now.Add(time.Millisecond))
	if !l.State().Probing {
		t.Fatal("no probe started after ProbeInterval")
	}
	l.ReleaseAt(old, now.Add(time.Second)) // admitted before the probe: ignored
	if !l.State().Probing {
		t.Fatal("a request admitted before the probe ended it")
	}
	p, _ := l.AcquireAt(now)
	l.ReleaseAt(p, now.Add(3*time.Millisecond))
	if s := l.State(); s.Probing || s.NoLoadLatency != 3*time.Millisecond {
		t.Errorf("probing %v, no-load %v; want the probe ended at 3ms", s.Probing, s.NoLoadLatency)
	}
}

// TestUpdate checks the limit after one window against the formula.
func TestUpdate(t *testing.T) {
	const l0 = 10 * time.Millisecond
	for _, c := range []struct {
		name     string
		inFlight int
		rtt      time.Duration
		want     float64
	}{
		// Within the buffer: gradient 1.25*10/10 clamps to... 1.25, full.
		{"no queueing, full", 20, l0, 20*1.25 + math.Sqrt(20)},
		// Twice as slow: gradient 0.625.
		{"queueing", 20, 2 * l0, 20*0.625 + math.Sqrt(20)},
		// Ten times as slow: the gradient is clamped at 0.5.
		{"deep queue", 20, 10 * l0, 20*0.5 + math.Sqrt(20)},
		// Idle: fewer than half the limit in flight, no growth.
		{"idle", 9, l0, 20},
		// Idle but slow: it still shrinks.
		{"idle and slow", 9, 2 * l0, 20*0.625 + math.Sqrt(20)},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLimiter(t, nil)
			now := probe(t, l, t0, l0)
			window(t, l, now, c.inFlight, c.rtt)
			if got := l.State().Estimate; math.Abs(got-c.want) > 1e-9 {
				t.Errorf("limit %v, want %v", got, c.want)
			}
			if got := l.Limit(); got != int(c.want) {
				t.Errorf("admission limit %d, want %d", got, int(c.want))
			}
		})
	}
}

func TestBounds(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.MaxLimit = 25; c.MinLimit = 5 })
	now := probe(t, l, t0, time.Millisecond)
	for i := 0; i < 10; i++ {
		now = window(t, l, now, l.Limit(), time.Millisecond)
	}
	if got := l.State().Estimate; got != 25 {
		t.Errorf("after fast windows the limit is %v, want MaxLimit 25", got)
	}
	for i := 0; i < 20; i++ {
		now = window(t, l, now, 1, 100*time.Millisecond)
	}
	if got := l.State().Estimate; got != 5 {
		t.Errorf("after slow windows the limit is %v, want MinLimit 5", got)
	}
}

func TestPushback(t *testing.T) {
	l := newLimiter(t, nil)
	if got := l.Pushback(); got != time.Millisecond {
		t.Errorf("pushback before any measurement %v, want the 1ms floor", got)
	}
	now := probe(t, l, t0, 4*time.Millisecond)
	if got := l.Pushback(); got != 4*time.Millisecond {
		t.Errorf("pushback after the probe %v, want the no-load latency 4ms", got)
	}
	window(t, l, now, 10, 10*time.Millisecond)
	if got := l.Pushback(); got != 6*time.Millisecond {
		t.Errorf("pushback with 10ms latency %v, want the queueing 6ms", got)
	}
}

func TestProbesAgainAndFollowsTheHandler(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.NoProbeJitter = true })
	now := probe(t, l, t0, time.Millisecond)
	// The handler becomes four times slower: the limit shrinks, then the
	// next probe learns the new latency.
	start := now
	for !l.State().Probing {
		if now.Sub(start) > 2*shed.DefaultProbeInterval {
			t.Fatal("no probe after twice ProbeInterval")
		}
		now = window(t, l, now, min(l.Limit(), 8), 4*time.Millisecond)
	}
	if now.Sub(start) < shed.DefaultProbeInterval || now.Sub(start) > shed.DefaultProbeInterval+2*shed.DefaultWindow {
		t.Errorf("probed again after %v, want after ProbeInterval (%v)", now.Sub(start), shed.DefaultProbeInterval)
	}
	if l.Limit() != shed.DefaultProbeLimit {
		t.Errorf("limit %d while probing, want %d", l.Limit(), shed.DefaultProbeLimit)
	}
	probe(t, l, now, 4*time.Millisecond)
	if got := l.State().NoLoadLatency; got != 4*time.Millisecond {
		t.Errorf("no-load latency %v after the probe, want 4ms", got)
	}
}

func TestSlowHandlersProbeLessOften(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.NoProbeJitter = true })
	now := probe(t, l, t0, time.Second)
	for i := 0; i < 100; i++ {
		now = window(t, l, now, 10, time.Second)
		if l.State().Probing {
			t.Fatalf("probing again after %v; want at least %v between probes of a 1s handler", now.Sub(t0), probeShare*time.Second)
		}
	}
}

func TestFasterWindowLowersNoLoad(t *testing.T) {
	l := newLimiter(t, nil)
	now := probe(t, l, t0, 4*time.Millisecond)
	window(t, l, now, 10, time.Millisecond)
	if got := l.State().NoLoadLatency; got != time.Millisecond {
		t.Errorf("no-load latency %v after a 1ms window, want 1ms", got)
	}
}

func TestFixed(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.MinLimit, c.MaxLimit, c.InitialLimit = 4, 4, 4 })
	if s := l.State(); s.Probing || s.Limit != 4 {
		t.Fatalf("a fixed limiter: %+v, want limit 4 and no probe", s)
	}
	now := t0
	for i := 0; i < 100; i++ {
		now = window(t, l, now, 4, time.Duration(1+i%3)*time.Millisecond)
		if s := l.State(); s.Probing || s.Limit != 4 {
			t.Fatalf("window %d: %+v, want limit 4 and no probe", i, s)
		}
	}
	if got := l.State().NoLoadLatency; got != time.Millisecond {
		t.Errorf("no-load latency %v, want the least window mean 1ms", got)
	}
}

// TestNeverOverLimit admits from many goroutines at once and checks that
// no more than the limit are ever in flight.
func TestNeverOverLimit(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.MinLimit, c.MaxLimit, c.InitialLimit = 5, 5, 5 })
	var in, most atomic.Int64
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				tok, ok := l.Acquire()
				if !ok {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				n := in.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				in.Add(-1)
				l.Release(tok)
			}
		}()
	}
	wg.Wait()
	if most.Load() > 5 {
		t.Errorf("%d in flight at once, limit 5", most.Load())
	}
	if admitted.Load() == 0 || l.InFlight() != 0 {
		t.Errorf("admitted %d, %d left in flight", admitted.Load(), l.InFlight())
	}
}

// New refuses a Config that fails Validate, with its error.
func TestNewValidates(t *testing.T) {
	cfg := shed.Config{MinLimit: 10, MaxLimit: 5}
	want := cfg.Validate()
	if want == nil {
		t.Fatalf("%+v is valid", cfg)
	}
	if l, err := New(cfg); l != nil || err == nil || err.Error() != want.Error() {
		t.Errorf("New(%+v) = %v, %v; want nil, %v", cfg, l, err, want)
	}
}

// The zero Config, and each zero field, mean the defaults; a default
// InitialLimit outside the bounds set moves into them; NoBuffer and
// NoProbeJitter mean none.
func TestZeroConfigMeansDefaults(t *testing.T) {
	defaults := shed.Config{InitialLimit: shed.DefaultInitialLimit, MinLimit: shed.DefaultMinLimit, MaxLimit: shed.DefaultMaxLimit,
		Buffer: shed.DefaultBuffer, Window: shed.DefaultWindow, ProbeInterval: shed.DefaultProbeInterval, ProbeJitter: shed.DefaultProbeJitter,
		ProbeLimit: shed.DefaultProbeLimit, ProbeSamples: shed.DefaultProbeSamples, Clock: clock.Real}
	with := func(f func(*shed.Config)) shed.Config { c := defaults; f(&c); return c }
	for _, tt := range []struct {
		cfg, want shed.Config
	}{
		{shed.Config{}, defaults},
		{shed.Config{MinLimit: 50, MaxLimit: 60}, with(func(c *shed.Config) { c.MinLimit, c.MaxLimit, c.InitialLimit = 50, 60, 50 })},
		{shed.Config{MaxLimit: 8}, with(func(c *shed.Config) { c.MaxLimit, c.InitialLimit = 8, 8 })},
		{shed.Config{NoBuffer: true, NoProbeJitter: true}, with(func(c *shed.Config) { c.Buffer, c.ProbeJitter, c.NoBuffer, c.NoProbeJitter = 0, 0, true, true })},
	} {
		l, err := New(tt.cfg)
		if err != nil {
			t.Fatalf("New(%+v): %v", tt.cfg, err)
		}
		got := l.Config()
		if got != tt.want {
			t.Errorf("New(%+v).Config() = %+v, want %+v", tt.cfg, got, tt.want)
		}
		if err := got.Validate(); err != nil { // shed reads zero fields as these defaults too
			t.Errorf("New(%+v).Config().Validate() = %v", tt.cfg, err)
		}
	}
}

// TestIdleLimitDoesNotDrift: one request at a time, a little slower than
// the no-load latency: the gradient is just under 1, and the limit must not
// creep up from the square root it adds.
func TestIdleLimitDoesNotDrift(t *testing.T) {
	l := newLimiter(t, nil)
	now := probe(t, l, t0, time.Millisecond)
	for i := 0; i < 3000; i++ {
		now = window(t, l, now, 1, time.Duration(1000+i%500)*time.Microsecond)
		if e := l.State().Estimate; e > shed.DefaultInitialLimit {
			t.Fatalf("window %d: limit %v rose over %d with one request in flight", i, e, shed.DefaultInitialLimit)
		}
	}
}

// TestProbeEndsWhenRequestsHang: requests admitted before a probe that
// never finish hold every probe slot; the probe still ends after its time,
// and requests are admitted again.
func TestProbeEndsWhenRequestsHang(t *testing.T) {
	l := newLimiter(t, func(c *shed.Config) { c.NoProbeJitter = true })
	now := probe(t, l, t0, time.Millisecond)
	for i := 0; i < shed.DefaultProbeLimit; i++ { // they never finish
		if _, ok := l.AcquireAt(now); !ok {
			t.Fatal("refused below the limit")
		}
	}
	now = now.Add(shed.DefaultProbeInterval)
	tok, _ := l.AcquireAt(now)
	now = now.Add(time.Millisecond)
	l.ReleaseAt(tok, now) // ends a window, and starts the probe: 3 in flight, the probe limit
	if !l.State().Probing {
		t.Fatal("no probe")
	}
	if _, ok := l.AcquireAt(now.Add(500 * time.Millisecond)); ok {
		t.Fatal("admitted over the probe limit")
	}
	if _, ok := l.AcquireAt(now.Add(2 * time.Second)); ok {
		t.Fatal("admitted over the probe limit at the refusal that ends the probe")
	}
	if s := l.State(); s.Probing || s.NoLoadLatency != time.Millisecond || s.Limit <= shed.DefaultProbeLimit {
		t.Fatalf("after the probe's time: %+v; want it ended, the old no-load latency kept and the limit restored", s)
	}
	if _, ok := l.AcquireAt(now.Add(2 * time.Second)); !ok {
		t.Fatal("still refusing after the probe ended")
	}
}

func TestMaxLimitFitsTheAdmissionWord(t *testing.T) {
	if _, err := New(shed.Config{MaxLimit: math.MaxInt32 + 1}); err == nil || !strings.Contains(err.Error(), "MaxLimit is 2147483648, must be at most 2147483647") {
		t.Fatalf("got %v", err)
	}
}
