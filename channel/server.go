package channel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/opentracing/opentracing-go"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"
	"golang.org/x/time/rate"
)

// RawRequest is an inbound raw call.
type RawRequest struct {
	Caller, Method string
	Arg2, Arg3     []byte
}

// RawResponse is the answer to a raw call. AppError marks an application
// error: a successful transport that callers never retry.
type RawResponse struct {
	Arg2, Arg3 []byte
	AppError   bool
}

// RawHandler serves raw calls. Returning an error made with Busy or
// Declined answers with that TChannel code; any other error answers
// Unexpected.
type RawHandler func(ctx context.Context, req *RawRequest) (*RawResponse, error)

// RegisterRaw registers h for method of the Channel's service.
func (c *Channel) RegisterRaw(method string, h RawHandler) error {
	if method == "" || h == nil {
		return errors.New("channel: RegisterRaw needs a method name and a handler")
	}
	c.tch.Register(c.guard(rawHandler(h)), method)
	return nil
}

// RegisterJSON registers tchannel-go JSON handlers by method name: each is a
// func(json.Context, *Req) (*Resp, error) of package
// github.com/uber/tchannel-go/json, so existing handlers move over as they
// are. Returning an error made with Busy or Declined answers with that
// TChannel code; any other error is an application error.
func (c *Channel) RegisterJSON(handlers map[string]any) error {
	if err := tjson.Register(registrar{c}, tjson.Handlers(handlers), func(context.Context, error) {}); err != nil {
		return fmt.Errorf("channel: RegisterJSON: %w", err)
	}
	return nil
}

// Registrar returns a tchannel.Registrar that registers handlers on the
// Channel behind its server-side guard (request counting and load shedding).
// Give it to tchannel-go's thrift.NewServer, or any code that registers
// tchannel.Handlers.
func (c *Channel) Registrar() tchannel.Registrar { return registrar{c} }

// registrar passes the Channel's registrations through its guard.
type registrar struct{ c *Channel }

func (r registrar) ServiceName() string                   { return r.c.tch.ServiceName() }
func (r registrar) Register(h tchannel.Handler, m string) { r.c.tch.Register(r.c.guard(h), m) }
func (r registrar) Logger() tchannel.Logger               { return r.c.tch.Logger() }
func (r registrar) StatsReporter() tchannel.StatsReporter {
	return r.c.tch.StatsReporter()
}
func (r registrar) StatsTags() map[string]string { return r.c.tch.StatsTags() }
func (r registrar) Peers() *tchannel.PeerList    { return r.c.tch.Peers() }
func (r registrar) Tracer() opentracing.Tracer   { return r.c.tch.Tracer() }

func rawHandler(h RawHandler) tchannel.Handler {
	return tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		args, err := raw.ReadArgs(call)
		if err != nil {
			return // the connection broke; there is no one to answer
		}
		res, err := h(ctx, &RawRequest{Caller: args.Caller, Method: args.Method, Arg2: args.Arg2, Arg3: args.Arg3})
		resp := call.Response()
		if err != nil {
			var se tchannel.SystemError
			if !errors.As(err, &se) {
				se = tchannel.NewSystemError(tchannel.ErrCodeUnexpected, "%v", err).(tchannel.SystemError)
			}
			_ = resp.SendSystemError(se)
			return
		}
		if res == nil {
			res = &RawResponse{}
		}
		if res.AppError {
			_ = resp.SetApplicationError()
		}
		if err := tchannel.NewArgWriter(resp.Arg2Writer()).Write(res.Arg2); err != nil {
			return
		}
		_ = tchannel.NewArgWriter(resp.Arg3Writer()).Write(res.Arg3)
	})
}

// ShedConfig limits what a Channel's server side accepts. Requests beyond a
// limit are answered Busy before any handler runs, so callers' busy
// throttling backs them off. A zero limit is no limit; at least one must be
// set.
type ShedConfig struct {
	// MaxRPS is the most requests per second admitted, spread evenly.
	MaxRPS float64
	// Burst is how many requests may arrive at once within MaxRPS.
	// Default: MaxRPS/10, at least 1.
	Burst int
	// MaxInFlight is the most requests handled at once.
	MaxInFlight int
	// Pushback, when set, is the hint sent with each Busy answer: Sluice
	// clients wait exactly this long before retrying; a negative value tells
	// them not to retry.
	Pushback time.Duration
}

// Validate reports the first field that breaks its rule.
func (s ShedConfig) Validate() error {
	switch {
	case s.MaxRPS < 0 || math.IsNaN(s.MaxRPS) || math.IsInf(s.MaxRPS, 0):
		return fmt.Errorf("channel: ShedConfig.MaxRPS is %v, must be a finite number >= 0", s.MaxRPS)
	case s.Burst < 0:
		return fmt.Errorf("channel: ShedConfig.Burst is %d, must be >= 0", s.Burst)
	case s.MaxInFlight < 0:
		return fmt.Errorf("channel: ShedConfig.MaxInFlight is %d, must be >= 0", s.MaxInFlight)
	case s.MaxRPS == 0 && s.MaxInFlight == 0:
		return errors.New("channel: ShedConfig sets no limit; set MaxRPS or MaxInFlight")
	}
	return nil
}

type shedder struct {
	cfg      ShedConfig
	rate     *rate.Limiter
	inFlight atomic.Int64
}

func newShedder(cfg ShedConfig) (*shedder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &shedder{cfg: cfg}
	if cfg.MaxRPS > 0 {
		burst := cfg.Burst
		if burst == 0 {
			burst = max(1, int(cfg.MaxRPS/10))
		}
		s.rate = rate.NewLimiter(rate.Limit(cfg.MaxRPS), burst)
	}
	return s, nil
}

// admit returns nil and takes an in-flight slot (give it back with done), or
// the Busy error to answer with.
func (s *shedder) admit() error {
	if s.cfg.MaxInFlight > 0 && s.inFlight.Add(1) > int64(s.cfg.MaxInFlight) {
		s.inFlight.Add(-1)
		return s.busy("server overloaded: more than %d requests in flight", s.cfg.MaxInFlight)
	}
	if s.rate != nil && !s.rate.Allow() {
		s.done()
		return s.busy("server overloaded: above %v requests per second", s.cfg.MaxRPS)
	}
	return nil
}

func (s *shedder) busy(format string, args ...any) error {
	if s.cfg.Pushback != 0 {
		return BusyAfter(s.cfg.Pushback, format, args...)
	}
	return Busy(format, args...)
}

func (s *shedder) done() {
	if s.cfg.MaxInFlight > 0 {
		s.inFlight.Add(-1)
	}
}

// guard counts inbound requests and sheds the excess when shedding is on.
func (c *Channel) guard(h tchannel.Handler) tchannel.Handler {
	scope := c.rec.Scope()
	inbound, shed := scope.Counter(stats.ServerRequests), scope.Counter(stats.ServerShed)
	return tchannel.HandlerFunc(func(ctx context.Context, call *tchannel.InboundCall) {
		inbound.Inc(1)
		if c.shed != nil {
			if err := c.shed.admit(); err != nil {
				shed.Inc(1)
				_ = call.Response().SendSystemError(err)
				return
			}
			defer c.shed.done()
		}
		h.Handle(ctx, call)
	})
}
