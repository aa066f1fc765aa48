package channel

import (
	"context"
	"strings"

	"github.com/sluice-rpc/sluice/internal/tchconn"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/classctx"
)

// A call's criticality class crosses tchannel-go, which has no room for a
// header of Sluice's own, inside the routing delegate ("rd") transport
// header: one byte after a NUL byte, which no service name holds. The
// byte is the class's digit ('1' to '4'), or its letter ('a' to 'd') when
// the attempt is a retry or hedge, or serves one upstream (see
// RetryConfig.Chained). The client sets it through tchannel-go's
// CallOptions; the server reads and strips it before anything else sees
// the routing delegate. Between Sluice peers the routing delegate carries
// it as it is; on a connection to a plain peer (internal/tchconn) the mark
// is cut before the call leaves, so a plain peer never sees it. A Critical
// first attempt, the default, is never marked: a call without a mark costs
// nothing.
const classMark = string(rune(tchconn.ClassMark))

// maxClassMark is what a mark adds to a routing delegate.
const maxClassMark = len(classMark) + 1

// markClass returns the tchannel-go call options t (nil: callOptionsFor's
// for format f) with class c marked in the routing delegate, as a retry
// or hedge if retry is set, a copy of their own.
func markClass(t *tchannel.CallOptions, f tchannel.Format, c criticality.Class, retry bool) *tchannel.CallOptions {
	var m tchannel.CallOptions
	if t != nil {
		m = *t
	}
	m.Format = f
	if !c.Valid() {
		c = criticality.Critical
	}
	b := '0' + rune(c)
	if retry {
		b = 'a' - 1 + rune(c)
	}
	m.RoutingDelegate += classMark + string(b)
	return &m
}

// unmarkClass splits a routing delegate read from a call into the
// delegate the caller gave, the class marked on it (0: none, or a mark
// that names no class) and whether the mark says retry.
func unmarkClass(rd string) (string, criticality.Class, bool) {
	i := strings.LastIndex(rd, classMark)
	if i < 0 {
		return rd, 0, false
	}
	var (
		c     criticality.Class
		retry bool
	)
	if m := rd[i+len(classMark):]; len(m) == 1 {
		switch b := m[0]; {
		case b >= 'a':
			c, retry = criticality.Class(b-'a'+1), true
		default:
			c = criticality.Class(b - '0')
		}
		if !c.Valid() {
			c, retry = 0, false
		}
	}
	return rd[:i], c, retry
}

// classOf returns the class of an inbound call that came on tc (nil: not
// a Conn of the Channel's): the one its client marked, else Critical, at
// most the class WithCriticalityCap trusts its caller with; and whether
// its client marked it a retry or hedge.
func (c *Channel) classOf(call *tchannel.InboundCall, tc *tchconn.Conn) (criticality.Class, bool) {
	var (
		cls   criticality.Class
		retry bool
	)
	if tc != nil && tc.Signalled() { // only a Sluice client marks a class (see tchconn.ClassMark)
		_, cls, retry = unmarkClass(call.RoutingDelegate())
	}
	if cls == 0 {
		cls = criticality.Critical
	}
	if trust := c.o.classCap; trust != nil {
		if most := trust(call.CallerName()); most.Valid() && most < cls {
			cls = most
		}
	}
	return cls, retry
}

// WithCriticalityCap has the Channel's server trust each caller (the
// TChannel caller name its calls carry) with at most the class most
// returns for it: a call that claims a higher class, or none (Critical),
// is served as that class, by the load shedding and by the handler's
// outbound calls. Without it every caller is trusted with the class it
// claims. A TChannel caller name is what the caller says it is: cap the
// callers you do not control, and trust names only on connections whose
// peers you authenticate (WithTLS and PeerIdentity). most is called for
// every inbound call and must be fast; a value that is not a valid class
// caps nothing.
func WithCriticalityCap(most func(caller string) criticality.Class) Option {
	return func(o *options) { o.classCap = most }
}

// routingDelegateOf is the routing delegate the caller of call gave, its
// class mark removed.
func routingDelegateOf(call *tchannel.InboundCall) string {
	rd, _, _ := unmarkClass(call.RoutingDelegate())
	return rd
}

// withInboundClass returns the context a handler serves an inbound call
// of class c with, noting retry when the call is a retry or hedge: its
// outbound calls inherit c, and do not retry again (RetryConfig.Chained).
// A Critical first attempt, the default, needs no value.
func withInboundClass(ctx context.Context, c criticality.Class, retry bool) context.Context {
	if c != criticality.Critical && c.Valid() {
		ctx = classctx.WithInbound(ctx, uint8(c))
	}
	if retry {
		ctx = classctx.WithInboundRetry(ctx)
	}
	return ctx
}

// callClass returns the class of a call made with ctx on pol's method:
// the one the context set (criticality.WithClass), else the method's
// (service config), else its Client's (WithCriticality), else the inbound
// call's whose handler makes it, else Critical; and whether the inbound
// call whose handler makes it is a retry or hedge.
func callClass(ctx context.Context, pol *methodPolicy) (criticality.Class, bool) {
	set, inbound, retry := classctx.Lookup(ctx)
	switch {
	case set != 0:
		return criticality.Class(set), retry
	case pol.class != 0:
		return pol.class, retry
	case inbound != 0:
		return criticality.Class(inbound), retry
	}
	return criticality.Critical, retry
}

// refusingWord introduces, in a Busy answer's message, the highest class
// the answering server refuses at the moment (it refuses that class and
// every class below): a Sluice client refuses them itself for a while.
const refusingWord = " sluice-refusing="

// appendRefusing returns msg with the class c the server refuses noted.
func appendRefusing(msg string, c criticality.Class) string {
	if !c.Valid() {
		return msg
	}
	return msg + refusingWord + c.String()
}

// refusingOf returns the class a Busy answer's message says its server
// refuses (0: none), and the message without the note.
func refusingOf(msg string) (criticality.Class, string) {
	i := strings.LastIndex(msg, refusingWord)
	if i < 0 {
		return 0, msg
	}
	word := msg[i+len(refusingWord):]
	if j := strings.IndexByte(word, ' '); j >= 0 {
		word = word[:j]
	}
	c, err := criticality.Parse(word)
	if err != nil {
		return 0, msg
	}
	return c, msg[:i] + msg[i+len(refusingWord)+len(word):]
}
