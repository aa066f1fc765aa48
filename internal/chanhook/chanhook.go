// Package chanhook gives package thrift what its server needs of a
// Channel's server side without making it part of package channel's API:
// the guarded registrar, the maximum request size, the inbound middleware
// and the metrics scope. None of it is for users; Go's internal rule lets only this
// module and the tools module beside it import it.
//
// Package channel sets ServerOf when it is initialised (the pattern of
// grpc-go's internal package), so the hook is there in any program that
// links package channel.
package chanhook

import (
	"context"

	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
)

// Server is a Channel's server side, as package thrift's server uses it.
type Server struct {
	// Registrar registers tchannel-go handlers behind the Channel's guard
	// (request counting, load shedding, declining while it closes). Its
	// Register panics if the method is registered with RegisterRaw or
	// RegisterJSON (a tchannel.Registrar cannot return an error).
	Registrar tchannel.Registrar
	// MaxRequestSize is the most bytes of arguments the Channel's
	// handlers accept in a request (channel.WithMaxRequestSize).
	MaxRequestSize int64
	// Inbound runs the Channel's inbound middleware around next, for the
	// call of ctx (tchannel.CurrentCall) to method in format f with the
	// application headers h; nil when the Channel has no middleware.
	Inbound func(ctx context.Context, method string, f tchannel.Format, h map[string]string, next func(context.Context) error) error
	// Scope is the scope the Channel reports its metrics to (the one given
	// to channel.WithScope, or a no-op scope); never nil.
	Scope tally.Scope
	// Answered tells the Channel's server metrics how the call of ctx (the
	// context a registered handler was given) is answered: with err, as
	// tchannel-go's Thrift server answers it (nil: no system error), and
	// with an application error if appError. Never nil; it does nothing
	// when the Channel records no server metrics.
	Answered func(ctx context.Context, err error, appError bool)
}

// ServerOf returns the server side of ch, a *channel.Channel. ch is an any
// because package channel, which sets ServerOf, imports this package and
// so cannot be imported by it.
var ServerOf func(ch any) (Server, error)
