// Package classctx holds a call's criticality class in a context, as
// package criticality and the Channel's server see it: set by the
// application (criticality.WithClass) or by the server for the inbound
// call a handler serves (inherited by the handler's outbound calls). The
// class is a criticality.Class's value; this package cannot import that
// type without a cycle.
package classctx

import "context"

type (
	setKey     struct{}
	inboundKey struct{}
)

// WithSet returns ctx with class c set by the application.
func WithSet(ctx context.Context, c uint8) context.Context {
	return context.WithValue(ctx, setKey{}, c)
}

// Set returns the class the application set on ctx, or 0.
func Set(ctx context.Context) uint8 {
	c, _ := ctx.Value(setKey{}).(uint8)
	return c
}

// WithInbound returns ctx with c, the class of the inbound call a handler
// serves with it.
func WithInbound(ctx context.Context, c uint8) context.Context {
	return context.WithValue(ctx, inboundKey{}, c)
}

// Inbound returns the class of the inbound call ctx serves, or 0.
func Inbound(ctx context.Context) uint8 {
	c, _ := ctx.Value(inboundKey{}).(uint8)
	return c
}
