package channel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/channel/channelz"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/internal/ratelimit"
	"github.com/sluice-rpc/sluice/internal/retryexec"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
)

// PacingConfig makes calls to a service follow the rate-limit signals its
// servers send: Aliyun's throttle-aware backoff and "disable requests during
// throttling", and a client rate throttling pacer (Heroku's strategies).
type PacingConfig struct {
	// Pacer is the client rate throttling strategy; the zero value is the
	// null pacer (no sleep before calls).
	Pacer pacing.Config
	// MaxDelay is the longest a call may wait for the server's throttling
	// window (Aliyun's maximum retry interval): a retry or a new call that
	// would wait longer fails at once with an error saying how long the
	// window still runs. It must be >= 0; 0 means 20 s, the maximum retry
	// interval of Aliyun's example.
	MaxDelay time.Duration
	// Debug sends "X-RateLimit-Mode: debug" on JSON and Thrift calls,
	// asking servers for quota headers on every response.
	Debug bool
}

// defaultPacingMaxDelay is PacingConfig.MaxDelay when it is 0: the maximum
// retry interval of Aliyun's example (20 s).
const defaultPacingMaxDelay = 20 * time.Second

// Validate reports the first field that breaks its rule, as a
// *retry.FieldError, or nil. The zero value is valid: the null pacer and
// a MaxDelay of 20 s.
func (p PacingConfig) Validate() error {
	if err := p.Pacer.Validate(); err != nil {
		return config.Nest(err, "channel", "PacingConfig.Pacer")
	}
	if p.MaxDelay < 0 {
		return config.Errorf("channel", "PacingConfig.MaxDelay", p.MaxDelay, "must be >= 0 (0 means the default, %v)", defaultPacingMaxDelay)
	}
	return nil
}

// WithPacing makes the Client's calls follow its servers' rate-limit
// signals.
// A Busy answer counts as "rate limited" (TChannel's 429); its pushback, or
// the quota headers of JSON and Thrift responses (X-RateLimit-User-API,
// X-RateLimit-User, RateLimit-Remaining/-Limit/-Reset, Retry-After), give the
// throttling window. A retry waits max(the window's time left, an equal-jitter
// backoff, the pacer's sleep); new calls to a throttled service or method are
// held back until the window ends, or fail at once when it outlasts MaxDelay
// or their deadline.
func WithPacing(cfg PacingConfig) ClientOption {
	return func(o *clientOptions) { o.pacing, o.newPacer = &cfg, newPacer }
}

// pacing is what the pipeline asks of a Client's pacer. The pipeline holds
// its pacer as this interface, made only by newPacer, which only
// WithPacing names: a program that never paces links none of the pacer's
// code (the rate-limit header parsers, the windows, the strategies).
type pacingState interface {
	// before runs ahead of a call's first attempt (see (*pacer).before).
	before(ctx context.Context, c *Channel, keys [2]string) error
	// response reads a response's quota headers.
	response(c *Channel, method string, h map[string]string)
	// busy turns a Busy answer into the retry's wait.
	busy(c *Channel, method string, o *retryexec.Outcome, b backoff.Exponential, n int) error
	// debugMode reports whether calls ask the server for debug quota
	// headers (PacingConfig.Debug).
	debugMode() bool
	// debug is the pacer's part of Channel.Debug.
	debug(methods []methodDebug, now time.Time) *channelz.Pacing
}

// pacer is one service's pacing state.
type pacer struct {
	cfg       PacingConfig
	pacer     ratelimit.Pacer
	windows   *ratelimit.Windows
	service   string
	malformed tally.Counter
	held      tally.Counter
	rejected  tally.Counter
	sleep     tally.Timer
}

func newPacer(c *Channel, service string, cfg PacingConfig) (pacingState, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	} else if cfg.MaxDelay == 0 {
		cfg.MaxDelay = defaultPacingMaxDelay
	}
	p, err := ratelimit.New(cfg.Pacer)
	if err != nil {
		return nil, fmt.Errorf("channel: PacingConfig.Pacer: %w", err)
	}
	s := c.rec.Scope().Tagged(map[string]string{stats.TagService: service})
	return &pacer{cfg: cfg, pacer: p, windows: ratelimit.NewWindows(c.o.clock), service: service,
		malformed: s.Counter(stats.RateLimitMalformed), held: s.Counter(stats.RateLimitHeld),
		rejected: s.Counter(stats.RateLimitRejected), sleep: s.Timer(stats.RateLimitSleep)}, nil
}

// before runs ahead of a call's first attempt: it waits out a throttling
// window the server announced for the service or the method (or fails at
// once), then sleeps what the pacer asks.
func (p *pacer) before(ctx context.Context, c *Channel, keys [2]string) error {
	// Both windows share one MaxDelay: waiting out the service's window
	// leaves less for the method's.
	start := c.o.clock.Now()
	for _, key := range keys {
		if p.windows.Remaining(key) > 0 {
			p.held.Inc(1)
		}
		budget := max(p.cfg.MaxDelay-c.o.clock.Now().Sub(start), time.Nanosecond)
		if err := p.windows.Wait(ctx, key, budget); err != nil {
			if errors.Is(err, pacing.ErrRateLimited) {
				p.rejected.Inc(1)
			}
			return err
		}
	}
	if d := p.pacer.Before(c.o.clock.Now()); d > 0 {
		p.sleep.Record(d)
		return clock.Sleep(ctx, c.o.clock, d)
	}
	return nil
}

// response reads the quota headers of a response that reached the caller:
// a spent quota opens a window for new calls, and the pacer learns from the
// success and its headers (as the rate simulator's clients do, whose runs
// the README's pacer figures come from).
func (p *pacer) response(c *Channel, method string, h map[string]string) {
	now := c.o.clock.Now()
	sig, err := ratelimit.ParseHeaders(h, now)
	if err != nil {
		p.malformed.Inc(1)
	}
	if ratelimit.Throttled(sig) {
		p.windows.RecordSignal(p.service, method, sig)
	}
	p.pacer.OnSuccess(now, sig)
}

// busy turns a Busy answer (TChannel's "rate limited") into the retry's
// wait: the larger of the window's time left (the answer's pushback), an
// equal-jitter backoff and the pacer's sleep. When that exceeds MaxDelay the
// call must not retry: it returns the window error to report.
func (p *pacer) busy(c *Channel, method string, o *retryexec.Outcome, b backoff.Exponential, n int) error {
	now := c.o.clock.Now()
	var sig pacing.Signal
	if o.Pushback.Kind == retry.PushbackDelay {
		sig = pacing.Signal{Fields: pacing.FieldRetryAfter, RetryAfter: o.Pushback.Delay}
		p.windows.RecordSignal(p.service, method, sig)
	}
	pause := p.pacer.OnRateLimited(now, sig)
	wait, tooLong := ratelimit.Delay(b, n, c.rand(), ratelimit.Wait(sig), p.cfg.MaxDelay)
	if tooLong {
		p.rejected.Inc(1)
		o.Pushback = retry.PushbackStopped()
		return &pacing.WindowError{Key: ratelimit.ServiceKey(p.service), Remaining: wait, Limit: p.cfg.MaxDelay}
	}
	if o.Pushback.Kind != retry.PushbackStop {
		o.Pushback = retry.PushbackAfter(max(wait, pause))
	}
	return nil
}

func (p *pacer) debugMode() bool { return p.cfg.Debug }

// paceResponse applies the service's pacing to a successful attempt's
// response: its rate-limit headers.
func (st *callState) paceResponse(res *Response) {
	if p := st.pol.pacer; p != nil {
		p.response(st.c, st.spec.method, res.Headers)
	}
}

// paceFailure applies the service's pacing to a failed attempt's outcome
// o: a Busy answer waits as its rate-limit headers and the backoff say.
func (st *callState) paceFailure(o *retryexec.Outcome, n int) {
	p := st.pol.pacer
	if p == nil {
		return
	}
	ce, ok := o.Err.(*CallError)
	if !ok || ce.Code != codes.Busy {
		return
	}
	if werr := p.busy(st.c, st.spec.method, o, st.pol.backoff, n+1); werr != nil {
		ce.Err = fmt.Errorf("%w; %w", ce.Err, werr)
		ce.Message = fmt.Sprintf("%s (rate limited: %v)", ce.Message, werr)
	}
}
