package channel

import (
	"context"
	"errors"
	"fmt"

	"github.com/opentracing/opentracing-go"
	"github.com/sluice-rpc/sluice/internal/chanhook"
	"github.com/uber/tchannel-go"
)

func init() {
	chanhook.ServerOf = func(ch any) (chanhook.Server, error) {
		c, ok := ch.(*Channel)
		if !ok || c == nil {
			return chanhook.Server{}, fmt.Errorf("chanhook: ServerOf a %T, want a non-nil *channel.Channel", ch)
		}
		s := chanhook.Server{Registrar: registrar{c}, MaxRequestSize: c.o.maxRequest, Scope: c.rec.Scope(), Answered: answeredVia}
		if mw := c.inboundMiddleware(); mw != nil {
			s.Inbound = func(ctx context.Context, method string, f tchannel.Format, h map[string]string, next func(context.Context) error) error {
				in := &Inbound{Format: f, Headers: h}
				if call, ok := tchannel.CurrentCall(ctx).(*tchannel.InboundCall); ok {
					in = inboundOf(call, f, h)
				}
				in.Method = method
				return mw(ctx, in, next)
			}
		}
		return s, nil
	}
}

// registrar is package thrift's tchannel.Registrar (chanhook.Server): it
// registers tchannel-go handlers behind the Channel's guard, as
// RegisterHandler does. A tchannel.Registrar cannot return an error, so
// its Register panics if the method is already registered with
// RegisterRaw, RegisterJSON or RegisterHandler: a start-up mistake,
// reported at start-up instead of a handler silently replaced.
// Registering through it a method registered through it before replaces
// the handler, as on a plain tchannel-go channel (a second tchannel-go
// Thrift server on one Channel registers the Thrift meta service again).
// inboundMiddleware returns the Channel's inbound middlewares
// (WithInboundMiddleware) chained into one, the first outermost, or nil if
// it has none. RegisterRaw, RegisterJSON and package thrift's server run it
// for every call, after reading the call's arguments and before the
// handler, which its next runs.
func (c *Channel) inboundMiddleware() InboundMiddleware {
	switch mws := c.o.inboundMW; len(mws) {
	case 0:
		return nil
	case 1:
		return mws[0]
	default:
		return func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
			return chainInbound(mws, in, next)(ctx)
		}
	}
}

// RegisterHandler registers h, a tchannel-go handler that reads its
// arguments and writes its answer itself, for method of the Channel's
// service, behind the Channel's server-side guard: request counting, load
// shedding (WithShedding), the peer limits, and declining while the
// Channel closes. Each method is registered once: registering a method
// again, by any means, is an error. The Channel's maximum request size and
// inbound middleware do not apply, since h reads its own arguments.
//
// h must answer a call before it returns, as tchannel-go's raw, JSON and
// Thrift handlers do: when one returns without an answer, the Channel
// releases the call (its caller times out), so that tchannel-go does not
// hold it, its frame and a goroutine for the time to live the caller
// claimed.
func (c *Channel) RegisterHandler(method string, h tchannel.Handler) error {
	if method == "" || h == nil {
		return errors.New("channel: RegisterHandler needs a method name and a handler")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if via := c.registeredWith()[method]; via != "" {
		return errRegistered(viaRegistrar, method, via)
	}
	c.register(viaRegistrar, method, c.serverStats(), h)
	return nil
}

type registrar struct{ c *Channel }

func (r registrar) ServiceName() string { return r.c.tch.ServiceName() }
func (r registrar) Register(h tchannel.Handler, m string) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if via := r.c.registeredWith()[m]; via == viaRaw || via == viaJSON {
		panic(fmt.Sprintf("channel: Register: method %q is already registered with %s; register each method once", m, via))
	}
	r.c.register(viaRegistrar, m, r.c.serverStats(), h)
}
func (r registrar) Logger() tchannel.Logger { return r.c.tch.Logger() }
func (r registrar) StatsReporter() tchannel.StatsReporter {
	return r.c.tch.StatsReporter()
}
func (r registrar) StatsTags() map[string]string { return r.c.tch.StatsTags() }
func (r registrar) Peers() *tchannel.PeerList    { return r.c.tch.Peers() }
func (r registrar) Tracer() opentracing.Tracer   { return r.c.tch.Tracer() }
