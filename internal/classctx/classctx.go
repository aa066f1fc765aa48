// Package classctx holds a call's criticality class in a context, as
// package criticality and the Channel's server see it: set by the
// application (criticality.WithClass) or by the server for the inbound
// call a handler serves (inherited by the handler's outbound calls). A
// class is a criticality.Class's value; this package cannot import that
// type without a cycle. It also holds whether the inbound call is a retry
// or hedge (or serves one upstream): the handler's outbound calls then do
// not retry again (see package channel's RetryConfig.Chained).
package classctx

import "context"

type key struct{}

// classes is what a context holds: the class the application set and the
// inbound call's, each 0 when none, and whether the inbound call is a
// retry. One value, so that a call finds all with one lookup: every call
// looks.
type classes struct {
	set, inbound uint8
	retry        bool
}

func get(ctx context.Context) classes {
	c, _ := ctx.Value(key{}).(classes)
	return c
}

// WithSet returns ctx with class c set by the application.
func WithSet(ctx context.Context, c uint8) context.Context {
	v := get(ctx)
	v.set = c
	return context.WithValue(ctx, key{}, v)
}

// WithInbound returns ctx with c, the class of the inbound call a handler
// serves with it.
func WithInbound(ctx context.Context, c uint8) context.Context {
	v := get(ctx)
	v.inbound = c
	return context.WithValue(ctx, key{}, v)
}

// Get returns the class the application set on ctx and the inbound
// call's, each 0 when none.
func Get(ctx context.Context) (set, inbound uint8) {
	v := get(ctx)
	return v.set, v.inbound
}

// WithInboundRetry returns ctx noting that the inbound call a handler
// serves with it is a retry or hedge, or serves one upstream.
func WithInboundRetry(ctx context.Context) context.Context {
	v := get(ctx)
	v.retry = true
	return context.WithValue(ctx, key{}, v)
}

// Lookup returns what Get does and whether the inbound call is a retry
// (WithInboundRetry), with one lookup.
func Lookup(ctx context.Context) (set, inbound uint8, retry bool) {
	v := get(ctx)
	return v.set, v.inbound, v.retry
}
