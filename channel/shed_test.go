package channel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/uber/tchannel-go"
)

// gateServer is a Sluice server whose "work" handler waits until released
// and counts how many run at once.
type gateServer struct {
	ch            *Channel
	release       chan struct{}
	running, most atomic.Int64
	ran           atomic.Int64
}

func startGateServer(t *testing.T, cfg ShedConfig, methods ...string) *gateServer {
	t.Helper()
	ch, err := New("kv", WithShedding(cfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	g := &gateServer{ch: ch, release: make(chan struct{})}
	for _, m := range append([]string{"work"}, methods...) {
		if err := ch.RegisterRaw(m, func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
			n := g.running.Add(1)
			defer g.running.Add(-1)
			g.ran.Add(1)
			for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
			}
			<-g.release
			return &RawResponse{}, nil
		}); err != nil {
			t.Fatalf("RegisterRaw: %v", err)
		}
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(ch.Close)
	return g
}

// burst sends n raw calls of method at once through a plain tchannel-go
// client (no retries, no client throttling) and returns their errors as
// they come.
func burst(t *testing.T, hp, method string, n int) <-chan error {
	t.Helper()
	client := plainClient(t, nil)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
			defer cancel()
			call, err := client.BeginCall(ctx, hp, "kv", method, nil)
			if err == nil {
				_, _, _, err = rawWriteArgs(call)
			}
			errs <- err
		}()
	}
	return errs
}

func rawWriteArgs(call *tchannel.OutboundCall) ([]byte, []byte, *tchannel.OutboundCallResponse, error) {
	if err := tchannel.NewArgWriter(call.Arg2Writer()).Write(nil); err != nil {
		return nil, nil, nil, err
	}
	if err := tchannel.NewArgWriter(call.Arg3Writer()).Write(nil); err != nil {
		return nil, nil, nil, err
	}
	resp := call.Response()
	var a2, a3 []byte
	if err := tchannel.NewArgReader(resp.Arg2Reader()).Read(&a2); err != nil {
		return nil, nil, resp, err
	}
	err := tchannel.NewArgReader(resp.Arg3Reader()).Read(&a3)
	return a2, a3, resp, err
}

// checkBusyWithPushback checks that err is Busy with a parsable pushback
// hint of a positive delay.
func checkBusyWithPushback(t *testing.T, err error) {
	t.Helper()
	var se tchannel.SystemError
	if !errors.As(err, &se) {
		t.Fatalf("want a Busy system error, got %v: errors.As(err, &se) = false, want true", err)
	}
	if got := se.Code(); got != tchannel.ErrCodeBusy {
		t.Fatalf("error %v: got %v, want %v", err, got, tchannel.ErrCodeBusy)
	}
	p, _ := retryexec.PushbackFromMessage(se.Message())
	if p.Kind != retry.PushbackDelay {
		t.Errorf("pushback in %q: got %v, want %v", se.Message(), p.Kind, retry.PushbackDelay)
	}
	if p.Delay <= time.Duration(0) {
		t.Errorf("pushback in %q: got %v, want > %v", se.Message(), p.Delay, time.Duration(0))
	}
}

// TestConcurrencyLimitUnderBurst: a burst of 10N calls at a server with a
// concurrency limit of N runs exactly N handlers, and answers the others
// Busy with a pushback before any handler runs.
func TestConcurrencyLimitUnderBurst(t *testing.T) {
	const n = 4
	fixedN := shed.Config{MinLimit: n, MaxLimit: n}
	for _, c := range []struct {
		name string
		cfg  ShedConfig
	}{
		{"MaxInFlight", ShedConfig{MaxInFlight: n}},
		{"adaptive, fixed at N (MinLimit = MaxLimit = N)", ShedConfig{Adaptive: &fixedN}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := startGateServer(t, c.cfg)
			errs := burst(t, g.ch.HostPort(), "work", 10*n)
			for i := 0; i < 9*n; i++ {
				select {
				case err := <-errs:
					checkBusyWithPushback(t, err)
				case <-time.After(testwait.Limit):
					t.Fatalf("only %d of %d shed calls answered", i, 9*n)
				}
			}
			testwait.Until(t, "N handlers running", func() bool { return g.running.Load() == n })
			close(g.release)
			for i := 0; i < n; i++ {
				if err := <-errs; err != nil {
					t.Fatalf("<-errs: %v", err)
				}
			}
			if got := g.most.Load(); got != n {
				t.Errorf("most handlers at once: got %v, want %v", got, n)
			}
			if got := g.ran.Load(); got != n {
				t.Errorf("handlers run: got %v, want %v", got, n)
			}
		})
	}
}

// TestAdaptiveLimitStartsWithAProbe: a fresh adaptive limit admits only the
// probe's requests; the rest of a burst is shed.
func TestAdaptiveLimitStartsWithAProbe(t *testing.T) {
	g := startGateServer(t, ShedConfig{Adaptive: &shed.Config{}})
	errs := burst(t, g.ch.HostPort(), "work", 20)
	for i := 0; i < 20-shed.DefaultProbeLimit; i++ {
		checkBusyWithPushback(t, testwait.Recv(t, errs, fmt.Sprintf("shed call %d of %d", i+1, 20-shed.DefaultProbeLimit)))
	}
	// The admitted calls' handlers may not all have started when the last
	// refusal arrives: released before, one would start after another
	// ended, and most would read one short.
	testwait.Until(t, "the probe's slots taken", func() bool { return g.running.Load() == shed.DefaultProbeLimit })
	close(g.release)
	for i := 0; i < shed.DefaultProbeLimit; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("<-errs: %v", err)
		}
	}
	if got := g.most.Load(); got != shed.DefaultProbeLimit {
		t.Errorf("g.most.Load() = %v, want %v", got, shed.DefaultProbeLimit)
	}
}

// TestHealthChecksAreNeverShed: with every slot taken, Meta::health still
// runs.
func TestHealthChecksAreNeverShed(t *testing.T) {
	g := startGateServer(t, ShedConfig{MaxInFlight: 1, MaxRPS: 0.001, Burst: 1})
	if err := g.ch.RegisterRaw(healthMethod, func(context.Context, *RawRequest) (*RawResponse, error) {
		return &RawResponse{Arg3: []byte("OK")}, nil
	}); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	errs := burst(t, g.ch.HostPort(), "work", 1)
	testwait.Until(t, "the slot taken", func() bool { return g.running.Load() == 1 })
	for i := 0; i < 3; i++ {
		_, err := plainCall(t, g.ch.HostPort(), healthMethod, tchannel.Raw, nil, nil)
		if err != nil {
			t.Fatalf("health check %d: %v", i, err)
		}
	}
	checkBusyWithPushback(t, <-burst(t, g.ch.HostPort(), "work", 1))
	close(g.release)
	if err := <-errs; err != nil {
		t.Fatalf("<-errs: %v", err)
	}
}

// TestAdaptiveLimitPerMethod: each method has its own limit by default, and
// one for all with AdaptiveShared.
func TestAdaptiveLimitPerMethod(t *testing.T) {
	const probeLimit = shed.DefaultProbeLimit
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			g := startGateServer(t, ShedConfig{Adaptive: &shed.Config{}, AdaptiveShared: shared}, "other")
			a := burst(t, g.ch.HostPort(), "work", probeLimit)
			testwait.Until(t, "the probe's slots taken", func() bool { return g.running.Load() == probeLimit })
			b := burst(t, g.ch.HostPort(), "other", 1)
			if shared {
				checkBusyWithPushback(t, <-b)
			} else {
				testwait.Until(t, "the other method running", func() bool { return g.running.Load() == probeLimit+1 })
			}
			close(g.release)
			for i := 0; i < probeLimit; i++ {
				if err := <-a; err != nil {
					t.Fatalf("<-a: %v", err)
				}
			}
			if !shared {
				if err := <-b; err != nil {
					t.Fatalf("<-b: %v", err)
				}
			}
		})
	}
}

func TestShedConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  ShedConfig
		want string
	}{
		{ShedConfig{AdaptiveShared: true, MaxRPS: 1}, "channel: ShedConfig.AdaptiveShared is true, needs Adaptive set"},
		{ShedConfig{Adaptive: &shed.Config{Buffer: math.NaN()}}, "channel: ShedConfig.Adaptive.Buffer is NaN"},
		{ShedConfig{Adaptive: &shed.Config{Clock: clock.NewFake(time.Unix(0, 0))}}, "channel: ShedConfig.Adaptive.Clock is *clock.Fake, must be nil or the Channel's clock"},
		{ShedConfig{MaxRPS: 1, Pushback: -time.Second}, "channel: ShedConfig.Pushback is -1s, must be >= 0 (NoRetry tells clients not to retry)"},
		{ShedConfig{MaxRPS: 1, Pushback: time.Second, NoRetry: true}, "channel: ShedConfig.Pushback is 1s, must be 0 when NoRetry is set"},
	} {
		_, err := New("kv", WithShedding(c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(WithShedding(%+v)) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	// The zero ShedConfig is valid and sheds nothing.
	ch, err := New("kv", WithShedding(ShedConfig{}))
	if err != nil {
		t.Fatalf("New(WithShedding(ShedConfig{})) = %v, want nil", err)
	}
	ch.Close()
}

// busy.Config.Clock and shed.Config.Clock may be the Channel's own clock
// (one clock times a Channel); another is refused (TestShedConfigValidate,
// TestInvalidOptionsNameTheOption).
func TestConfigClocksMayBeTheChannels(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ch, err := New("kv", WithClock(clk), WithBusyConfig(busy.Config{Clock: clk}),
		WithShedding(ShedConfig{Adaptive: &shed.Config{Clock: clk}}))
	if err != nil {
		t.Fatalf("New with the Channel's clock on busy.Config and shed.Config: %v", err)
	}
	ch.Close()
}

// TestAdaptiveLimitOnARealServer drives a server whose handler has N
// workers (a semaphore) and a service time d with callers offering more
// than it can serve, honouring the pushback: the method's adaptive limit
// settles between N and 2N (the median of its samples over 3 s) and never
// strays below N/2 or above 3N. Its latency signal is real time, which a
// loaded machine makes noisy: under two CPU hogs single windows lifted it
// to 17.9. The exact band, every window within [N, 2N], is checked on a
// fake clock by tools/internal/sim/shedsim's TestPoolSettlesAndFollowsSteps.
func TestAdaptiveLimitOnARealServer(t *testing.T) {
	const n = 8
	d := 50 * time.Millisecond
	ch, err := New("kv", WithShedding(ShedConfig{Adaptive: &shed.Config{}}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(ch.Close)
	workers := make(chan struct{}, n)
	if err := ch.RegisterRaw("work", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		workers <- struct{}{}
		defer func() { <-workers }()
		time.Sleep(d)
		return &RawResponse{}, nil
	}); err != nil {
		t.Fatalf("RegisterRaw: %v", err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	lim := ch.tch.GetSubChannel("kv").GetHandlers()["work"].(*guarded).shed.(*methodShedder).adaptive

	client := plainClient(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ok, shedN atomic.Int64
	for i := 0; i < 3*n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, time.Second)
				call, err := client.BeginCall(cctx, ch.HostPort(), "kv", "work", nil)
				if err == nil {
					_, _, _, err = rawWriteArgs(call)
				}
				ccancel()
				var se tchannel.SystemError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &se) && se.Code() == tchannel.ErrCodeBusy:
					shedN.Add(1)
					p, _ := retryexec.PushbackFromMessage(se.Message())
					time.Sleep(p.Delay) // the caller honours the pushback: it paces the load
				}
			}
		}()
	}
	// Watch the estimate for 3 s after the first probe and the settling.
	testwait.Until(t, "the first probe to end", func() bool { return !lim.State().Probing })
	settle := time.Now().Add(2 * time.Second)
	var samples []float64
	for end := settle.Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		s := lim.State()
		if time.Now().After(settle) && !s.Probing {
			samples = append(samples, s.Estimate)
		}
	}
	cancel()
	wg.Wait()
	if len(samples) == 0 {
		t.Fatal("samples is empty")
	}
	slices.Sort(samples)
	lo, median, hi := samples[0], samples[len(samples)/2], samples[len(samples)-1]
	t.Logf("limit within [%.1f, %.1f], median %.1f; %d served, %d shed; no-load latency %v",
		lo, hi, median, ok.Load(), shedN.Load(), lim.State().NoLoadLatency)
	if !(median >= float64(n)) {
		t.Errorf("the limit settled below the workers: got %v, want >= %v", median, float64(n))
	}
	if !(median <= float64(2*n)) {
		t.Errorf("the limit settled over twice the workers: got %v, want <= %v", median, float64(2*n))
	}
	if !(lo >= float64(n)/2) {
		t.Errorf("the limit fell below half the workers: got %v, want >= %v", lo, float64(n)/2)
	}
	if !(hi <= float64(3*n)) {
		t.Errorf("the limit rose over three times the workers: got %v, want <= %v", hi, float64(3*n))
	}
	if got := shedN.Load(); got <= int64(0) {
		t.Errorf("nothing was shed: got %v, want > %v", got, int64(0))
	}
}

// TestPushbackRestsThePeer: a Busy answer with a pushback hint, to a client
// with nothing else pending, keeps it off that peer for the hinted time
// (its calls are refused locally, THROTTLED), then lets it try again.
func TestPushbackRestsThePeer(t *testing.T) {
	s := startServer(t, WithShedding(ShedConfig{MaxRPS: 0.001, Burst: 1, Pushback: 50 * time.Millisecond}))
	c, clk, _ := startClient(t, s)
	_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
	if err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	code := func() codes.Code {
		_, err := to(c, "kv").CallRaw(ctxTimeout(t), "echo", nil, nil)
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("CallRaw error = %v, want a %T", err, ce)
		}
		return ce.Code
	}
	if got := code(); got != codes.Busy {
		t.Errorf("the server's answer over its rate: got %v, want %v", got, codes.Busy)
	}
	if got := code(); got != codes.Throttled {
		t.Errorf("a call within the pushback: got %v, want %v", got, codes.Throttled)
	}
	clk.Add(49 * time.Millisecond)
	if got := code(); got != codes.Throttled {
		t.Errorf("a call 1ms before the pushback ends: got %v, want %v", got, codes.Throttled)
	}
	clk.Add(time.Millisecond)
	if got := code(); got != codes.Busy {
		t.Errorf("a call once the pushback ended reaches the server: got %v, want %v", got, codes.Busy)
	}
	if got := s.received.Load(); got != 1 {
		t.Errorf("s.received.Load() = %v, want %v", got, 1)
	}
}
