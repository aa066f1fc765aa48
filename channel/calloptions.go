package channel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/uber/tchannel-go"
)

// CallOption configures one call.
type CallOption func(*callOptions)

type callOptions struct {
	headers      map[string]string
	respHeaders  *map[string]string
	info         *CallInfo
	waitForReady bool
	// transport holds the TChannel transport headers every attempt sends
	// (WithShardKey, WithRoutingKey, WithRoutingDelegate, WithCallerName),
	// its Format unset; its zero value means none (an empty value is none,
	// as tchannel-go sends no empty header). Without
	// any, attempts share the per-format call options of callOptionsFor.
	transport tchannel.CallOptions
}

// WithHeaders sends application headers (TChannel's arg2) with a JSON or
// Thrift call. CallJSON sends them as its headers; Call adds them to its
// Request's Headers, replacing any of the same name, without modifying
// the caller's map. A Thrift client of package thrift sends its
// thrift.Context's headers (tchannel-go's thrift.WithHeaders) and these on
// top; CallJSON likewise sends the headers its context carries
// (json.WithHeaders, a ContextBuilder's) and these on top. A raw call has
// no application headers (it sends Arg2 as is) and ignores them.
func WithHeaders(h map[string]string) CallOption {
	return func(o *callOptions) { o.headers = h }
}

// ResponseHeaders stores the response's application headers in *dst when
// a JSON or Thrift call gets a response: CallJSON's, and Call's, whose
// Response carries them too (a Thrift client of package thrift also sets
// them on its thrift.Context, where ctx.ResponseHeaders() reads them). A
// call that fails leaves *dst as it was.
func ResponseHeaders(dst *map[string]string) CallOption {
	return func(o *callOptions) { o.respHeaders = dst }
}

// WaitForReady makes the call wait, until its deadline, for a peer to
// become ready when every peer is in transient failure, instead of failing
// at once with UNAVAILABLE (gRPC's waitForReady). Without it a call waits
// only while some peer is connecting. The service config's waitForReady
// sets it for a method's every call.
func WaitForReady() CallOption {
	return func(o *callOptions) { o.waitForReady = true }
}

// maxTransportHeader is the longest value a TChannel transport header
// carries: a call frame writes each as string~1. tchannel-go does not check
// it before sending; a longer value fails the call's frame as it is
// written, with an error that names no header.
const maxTransportHeader = 255

// WithShardKey sends key as the call's shard key, TChannel's transport
// header "sk", on every attempt: ringpop-based servers and relays route the
// call by it, and a handler reads it with tchannel.InboundCall.ShardKey
// (Inbound.ShardKey behind Sluice's inbound middleware). It also chooses
// the peer: the call goes to the key's home on a consistent-hash ring over
// the service's peers (weights respected), unless that peer has failed, is
// ejected or throttled, or already has more than its share of the calls in
// flight (ceil(1.25 x (m + 1) / n) with equal weights, m the calls in
// flight to all n peers): then to the next peer on the ring. Retries and
// hedges go to the next distinct peers on the ring. A call waits, within
// its deadline, for a home connecting for the first time or after a
// healthy close, not for one reconnecting after a failure. Calls with the same
// key from any Sluice client reach the same peer while the peers stay the
// same; when 1 of 10 peers leaves, only its keys (a tenth) move. key is at most 255
// bytes (TChannel's limit); a longer one fails the call with BAD_REQUEST
// before anything is sent. An empty key sends no header.
//
// A shard key set through tchannel-go's ContextBuilder (SetShardKey) on
// the call's context does the same, and so do its routing key, routing
// delegate and CallOptions' CallerName for the options below, with the
// same limits: a call sends and routes by them as tchannel-go does. Where
// both set one header, the CallOption wins.
func WithShardKey(key string) CallOption {
	return func(o *callOptions) { o.transport.ShardKey = key }
}

// WithRoutingKey sends key as the call's routing key, TChannel's transport
// header "rk", on every attempt: it names the traffic group a relay should
// send the call to, in place of the service name. At most 255 bytes, as
// WithShardKey; an empty key sends no header.
func WithRoutingKey(key string) CallOption {
	return func(o *callOptions) { o.transport.RoutingKey = key }
}

// WithRoutingDelegate sends service as the call's routing delegate,
// TChannel's transport header "rd", on every attempt: a service that can
// route the call to an instance of the one it is for. At most 253 bytes
// (a call's criticality class may take the header's last 2, to a Sluice
// server only), and no NUL byte; an empty one sends no header.
func WithRoutingDelegate(service string) CallOption {
	return func(o *callOptions) { o.transport.RoutingDelegate = service }
}

// WithCallerName sends name as the call's caller, TChannel's transport
// header "cn", on every attempt, in place of the Channel's service name
// (the default): for proxies that forward calls on behalf of others. At
// most 255 bytes, as WithShardKey; an empty name keeps the default.
func WithCallerName(name string) CallOption {
	return func(o *callOptions) { o.transport.CallerName = name }
}

// transportFor returns the tchannel-go call options every attempt of a call
// with options o, made with ctx, sends for a request of format f: o's
// transport headers (WithShardKey, WithRoutingKey, WithRoutingDelegate,
// WithCallerName) over those ctx carries from tchannel-go's ContextBuilder
// (SetShardKey, SetRoutingKey, SetRoutingDelegate, its CallOptions'
// CallerName), header by header, as tchannel-go would send them; nil when
// neither sets any (attempts then share callOptionsFor's). The format is
// always f: a ContextBuilder's SetFormat would send an arg scheme the
// arguments are not in. When ctx carries tchannel-go call options, the
// attempts must hide them from BeginCall, which would lay them over the
// call's: the ctxHide returned says how (tchCtx().hide). err says which
// header cannot be sent, naming where it came from. A call with neither
// costs one context lookup and no allocation.
func (o *callOptions) transportFor(ctx context.Context, f tchannel.Format) (*tchannel.CallOptions, ctxHide, error) {
	tc := tchCtx()
	v := tc.params(ctx)
	if v == nil && (o == nil || o.transport == (tchannel.CallOptions{})) {
		return nil, hideNothing, nil
	}
	return o.mergeTransport(tc.readParams(v), f)
}

// mergeTransport is transportFor's work when the call's options or its
// context's tchannel-go parameters (in) may set some header.
func (o *callOptions) mergeTransport(in ctxCallOptions, f tchannel.Format) (*tchannel.CallOptions, ctxHide, error) {
	var own tchannel.CallOptions
	if o != nil {
		own = o.transport
	}
	if own == (tchannel.CallOptions{}) && !in.set {
		return nil, hideNothing, nil
	}
	t := own
	for _, h := range [...]struct {
		own    string
		from   *string
		in     string
		opt    string
		setter string
	}{
		{own.ShardKey, &t.ShardKey, in.opts.ShardKey, "WithShardKey", "SetShardKey"},
		{own.RoutingKey, &t.RoutingKey, in.opts.RoutingKey, "WithRoutingKey", "SetRoutingKey"},
		{own.RoutingDelegate, &t.RoutingDelegate, in.opts.RoutingDelegate, "WithRoutingDelegate", "SetRoutingDelegate"},
		{own.CallerName, &t.CallerName, in.opts.CallerName, "WithCallerName", "CallOptions.CallerName"},
	} {
		if h.own == "" {
			*h.from = h.in
		}
		v := *h.from
		name := func() string {
			if h.own == "" {
				return "the context's " + h.setter + " (tchannel-go's ContextBuilder)"
			}
			return h.opt
		}
		if len(v) > maxTransportHeader {
			return nil, hideNothing, fmt.Errorf("%s: the value is %d bytes; a TChannel transport header holds at most %d", name(), len(v), maxTransportHeader)
		}
		if h.opt == "WithRoutingDelegate" && (len(v) > maxTransportHeader-maxClassMark || strings.Contains(v, classMark)) {
			return nil, hideNothing, fmt.Errorf("%s: the value is %d bytes and holds %d NUL bytes; a routing delegate holds at most %d bytes (a call's class may take the rest), none of them NUL",
				name(), len(v), strings.Count(v, classMark), maxTransportHeader-maxClassMark)
		}
	}
	if t == (tchannel.CallOptions{}) {
		return nil, in.hideFor(), nil // the context's options set no header
	}
	t.Format = f
	return &t, in.hideFor(), nil
}

// CallInfo is how a call went: the attempts it sent and where they went.
type CallInfo struct {
	// Attempts is the number of attempts sent on the wire.
	Attempts int
	// Peer is the host:port that answered, or that the last attempt went
	// to ("" if none was chosen).
	Peer string
	// Peers is every peer an attempt went or tried to go to, in the order
	// they were chosen.
	Peers []string
}

// ReportCallInfo stores in *dst, when the call returns, successful or not,
// its attempts and peers: for CallJSON and CallRaw, whose results do not
// carry them (Call's Response and every *CallError do).
func ReportCallInfo(dst *CallInfo) CallOption {
	return func(o *callOptions) { o.info = dst }
}

// applyOptions returns the options opts set, or nil without any: applying
// them makes the options escape, an allocation the common call need not
// pay.
func applyOptions(opts []CallOption) *callOptions {
	if len(opts) == 0 {
		return nil
	}
	o := new(callOptions)
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// withHeaders returns req with the headers of WithHeaders added (Call's
// request, which is the caller's: a copy if there are any to add).
func (o *callOptions) withHeaders(req *Request) *Request {
	if o == nil || len(o.headers) == 0 || req == nil || req.Format == tchannel.Raw {
		return req
	}
	r := *req
	r.Headers = make(map[string]string, len(req.Headers)+len(o.headers))
	for k, v := range req.Headers {
		r.Headers[k] = v
	}
	for k, v := range o.headers {
		r.Headers[k] = v
	}
	return &r
}

// report fills the CallInfo and the response headers o asks for from the
// call's result: one place for every front-end (Call, CallJSON, CallRaw,
// package thrift's client).
func (o *callOptions) report(res *Response, err error) {
	if o == nil {
		return
	}
	if o.respHeaders != nil && res != nil {
		*o.respHeaders = res.Headers
	}
	if o.info == nil {
		return
	}
	switch {
	case res != nil:
		*o.info = CallInfo{Attempts: res.Attempts, Peer: res.Peer, Peers: res.Peers}
	default:
		var ce *CallError
		if errors.As(err, &ce) {
			*o.info = CallInfo{Attempts: ce.Attempts, Peer: ce.Peer, Peers: ce.Peers}
			if ce.Peer == "" && len(ce.Peers) > 0 {
				o.info.Peer = ce.Peers[len(ce.Peers)-1]
			}
		} else {
			*o.info = CallInfo{}
		}
	}
}
