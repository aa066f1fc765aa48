package channel

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/uber/tchannel-go"
)

// A context made by tchannel-go's ContextBuilder carries the call's
// options (SetShardKey, SetRoutingKey, SetRoutingDelegate, SetFormat, and
// the CallerName of its CallOptions) and its application headers
// (SetHeaders, AddHeader; json.WithHeaders and thrift.WithHeaders too) in
// context values. The headers have an exported reader
// (tchannel.ContextWithHeaders); the options have none: they sit in a
// value of an unexported type, which tchannel-go's BeginCall reads and lays
// over the call's own options on the wire, each set field winning. A
// Sluice call must know them before it chooses a peer (a shard key routes
// the call), and must send its own options over them (a Sluice option
// wins; a call's class rides in the routing delegate), so Sluice reads
// them itself:
//
//   - the two context keys are learnt from tchannel-go's own readers,
//     tchannel.CurrentCall and tchannel.Wrap, called on a context that
//     records the keys it is asked for;
//   - the options are read from the value under the first key by
//     reflection, by field name, without modifying anything: the field
//     "options" (a *tchannel.CallOptions) and "tracingDisabled" (a bool)
//     of tchannel-go's parameters. That layout is tchannel-go v1.34's;
//     probeTChannelContext checks it once, on a context a ContextBuilder
//     built, and if it ever differs the options are not read (the calls
//     behave as before: the headers reach the wire, routing ignores them),
//     and TestTChannelContextProbe fails;
//   - the attempts are begun with the options hidden from BeginCall: the
//     first key is bound again, to parameters a ContextBuilder built with
//     no options (tracing disabled or not, as the caller's context says).
//
// A call whose context carries none costs one context lookup. The probe
// runs on first use, not when the package is loaded: a program pays for it
// only once it makes a call.
var tchCtx = sync.OnceValue(probeTChannelContext)

// tchannelContext is what Sluice knows of tchannel-go's context values.
type tchannelContext struct {
	// paramsKey is tchannel-go's key of a call's parameters, nil when the
	// probe failed: Sluice then reads no options from contexts.
	paramsKey any
	// headersKey is tchannel-go's key of a context's headers (nil: not
	// found).
	headersKey any
	// paramsType is the type of the value under paramsKey (a pointer to
	// a struct); options and tracingOff index its fields.
	paramsType          reflect.Type
	options, tracingOff int
	// format, shardKey, routingKey, routingDelegate and callerName index
	// the fields of tchannel.CallOptions.
	format, shardKey, routingKey, routingDelegate, callerName int
	// bare and bareNoTrace are parameters with no call options, tracing
	// enabled and disabled: what hide binds paramsKey to.
	bare, bareNoTrace any
}

// keyProbe is a context that records the keys it is asked for.
type keyProbe struct {
	context.Context
	keys []any
}

func (p *keyProbe) Value(key any) any {
	p.keys = append(p.keys, key)
	return nil
}

// probeTChannelContext learns tchannel-go's context keys and the layout of
// its call parameters, and checks both on contexts a ContextBuilder built.
// Anything unexpected leaves paramsKey nil.
func probeTChannelContext() *tchannelContext {
	t := &tchannelContext{}
	p := &keyProbe{Context: context.Background()}
	if tchannel.CurrentCall(p) != nil || len(p.keys) != 1 {
		return t
	}
	paramsKey := p.keys[0]
	p.keys = nil
	tchannel.Wrap(p)
	if len(p.keys) >= 1 {
		t.headersKey = p.keys[0]
	}

	ctx, cancel := tchannel.NewContextBuilder(time.Minute).SetShardKey("sk").SetRoutingKey("rk").
		SetRoutingDelegate("rd").SetFormat(tchannel.JSON).DisableTracing().Build()
	defer cancel()
	v := reflect.ValueOf(ctx.Value(paramsKey))
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return t
	}
	st := v.Elem().Type()
	opts, ok1 := st.FieldByName("options")
	off, ok2 := st.FieldByName("tracingDisabled")
	if !ok1 || !ok2 || opts.Type != reflect.TypeFor[*tchannel.CallOptions]() || off.Type.Kind() != reflect.Bool ||
		len(opts.Index) != 1 || len(off.Index) != 1 {
		return t
	}
	t.paramsType, t.options, t.tracingOff = v.Type(), opts.Index[0], off.Index[0]
	co := reflect.TypeFor[tchannel.CallOptions]()
	for _, f := range []struct {
		name string
		i    *int
	}{{"Format", &t.format}, {"ShardKey", &t.shardKey}, {"RoutingKey", &t.routingKey},
		{"RoutingDelegate", &t.routingDelegate}, {"CallerName", &t.callerName}} {
		sf, ok := co.FieldByName(f.name)
		if !ok || sf.Type.Kind() != reflect.String || len(sf.Index) != 1 {
			return t
		}
		*f.i = sf.Index[0]
	}
	bare, cancel1 := tchannel.NewContextBuilder(time.Minute).Build()
	cancel1()
	bareNoTrace, cancel2 := tchannel.NewContextBuilder(time.Minute).DisableTracing().Build()
	cancel2()
	t.bare, t.bareNoTrace = bare.Value(paramsKey), bareNoTrace.Value(paramsKey)

	// The reading must give back what was built, and the bare parameters
	// must carry no options.
	t.paramsKey = paramsKey
	got := t.read(ctx)
	want := ctxCallOptions{set: true, tracingOff: true,
		opts: tchannel.CallOptions{Format: tchannel.JSON, ShardKey: "sk", RoutingKey: "rk", RoutingDelegate: "rd"}}
	if got != want || t.read(bare).set || t.read(bareNoTrace).set || !t.read(bareNoTrace).tracingOff {
		t.paramsKey = nil
	}
	return t
}

// ctxCallOptions is what a context says of a call through tchannel-go's
// call parameters.
type ctxCallOptions struct {
	// opts holds the string fields of the context's tchannel.CallOptions
	// (Format, ShardKey, RoutingKey, RoutingDelegate, CallerName).
	opts tchannel.CallOptions
	// set says that the context carries call options (a ContextBuilder's
	// CallOptions, even empty), which BeginCall would lay over the
	// call's: the attempts must hide them (see hide).
	set bool
	// tracingOff is the ContextBuilder's DisableTracing.
	tracingOff bool
}

// params returns the value ctx holds under tchannel-go's key of a call's
// parameters, or nil: one context lookup.
func (t *tchannelContext) params(ctx context.Context) any {
	if t.paramsKey == nil {
		return nil
	}
	return ctx.Value(t.paramsKey)
}

// read returns the call options ctx carries (see ctxCallOptions).
func (t *tchannelContext) read(ctx context.Context) ctxCallOptions {
	return t.readParams(t.params(ctx))
}

// readParams returns the call options of tchannel-go's call parameters v
// (params), allocating nothing.
func (t *tchannelContext) readParams(v any) (c ctxCallOptions) {
	if v == nil {
		return c
	}
	p := reflect.ValueOf(v)
	if p.Type() != t.paramsType || p.IsNil() {
		return c
	}
	params := p.Elem()
	c.tracingOff = params.Field(t.tracingOff).Bool()
	o := params.Field(t.options)
	if o.IsNil() {
		return c
	}
	o = o.Elem()
	c.set = true
	c.opts = tchannel.CallOptions{
		Format:          tchannel.Format(o.Field(t.format).String()),
		ShardKey:        o.Field(t.shardKey).String(),
		RoutingKey:      o.Field(t.routingKey).String(),
		RoutingDelegate: o.Field(t.routingDelegate).String(),
		CallerName:      o.Field(t.callerName).String(),
	}
	return c
}

// ctxHide says how a call's attempts hide the tchannel-go call options
// of its context from BeginCall (see hide).
type ctxHide uint8

const (
	hideNothing      ctxHide = iota // the context carries none
	hideOptions                     // bind parameters without options
	hideOptionsTrace                // the same, tracing disabled
)

// hideFor is how the attempts of a call whose context carries c hide it.
func (c ctxCallOptions) hideFor() ctxHide {
	switch {
	case !c.set:
		return hideNothing
	case c.tracingOff:
		return hideOptionsTrace
	}
	return hideOptions
}

// hide returns ctx with the tchannel-go call options it carries hidden
// from BeginCall, as h says: its parameters are replaced by ones with no
// call options, tracing disabled if ctx's disable it. (The other
// parameters matter only to calls that dial, which Sluice's never do, or
// to a handler's tchannel.CurrentCall, which an outbound call does not
// read.)
func (t *tchannelContext) hide(ctx context.Context, h ctxHide) context.Context {
	switch h {
	case hideOptions:
		return context.WithValue(ctx, t.paramsKey, t.bare)
	case hideOptionsTrace:
		return context.WithValue(ctx, t.paramsKey, t.bareNoTrace)
	}
	return ctx
}

// headers returns the application headers ctx carries through
// tchannel-go (json.WithHeaders, thrift.WithHeaders, a ContextBuilder's
// SetHeaders and AddHeader), or nil: those of a tchannel.ContextWithHeaders,
// or of one that ctx wraps (tchannel.Wrap finds them there too).
func (t *tchannelContext) headers(ctx context.Context) map[string]string {
	if hc, ok := ctx.(tchannel.ContextWithHeaders); ok {
		return hc.Headers()
	}
	if t.headersKey == nil || ctx.Value(t.headersKey) == nil {
		return nil
	}
	return tchannel.Wrap(ctx).Headers()
}
