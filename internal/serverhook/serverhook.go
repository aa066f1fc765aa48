// Package serverhook lets Sluice's own simulators drive a Doorman
// server's link to its parent by hand: no refresh loop, an in-memory
// transport, one round at a time on a fake clock. None of this is for
// users, so it stays out of package leasing/server's API; Go's internal
// rule lets only this module and the tools module beside it import it.
//
// Package leasing/server sets DriveParent when it is initialised (the
// pattern of grpc-go's internal package), so the hook is there in any
// program that links the server.
package serverhook

import (
	"context"
	"time"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// Parent is an intermediate server's link to its parent, run by its
// caller in place of the server's refresh loop.
type Parent interface {
	// Tick does at the server's clock's now what the refresh loop does
	// when it runs: unless the backoff after failed rounds is still
	// running, it sends one round of GetServerCapacity for all the
	// server's resources and applies the answers. It returns when to
	// tick next: half the shortest refresh interval the parent gave, the
	// end of a backoff after a failure, or later when there is nothing to
	// ask for (Woken then says when to tick sooner). After the server's
	// Stop it sends nothing.
	Tick(ctx context.Context) time.Time
	// Woken reports, and forgets, whether something happened since the
	// last call that should make the server ask its parent at once (a
	// new resource, a change of mastership): the caller then ticks.
	Woken() bool
}

// DriveParent takes over the parent link of srv, a *server.Server made
// with a Parent and not yet started: Start runs no refresh loop for it,
// the returned Parent's Tick runs each round, and dial, if not nil, opens
// the connections to the parent node's servers instead of gRPC. It fails
// for a root server (no Parent) and for one already started or stopped.
//
// srv is an any because package leasing/server, which sets DriveParent,
// imports this package and so cannot be imported by it.
var DriveParent func(srv any, dial func(addr string) (pb.Conn, error)) (Parent, error)

// Capacity returns the Doorman RPCs of srv, a *server.Server, to call
// in-process: what Register serves, without gRPC. Set by package
// leasing/server as DriveParent is.
var Capacity func(srv any) (pb.CapacityServer, error)
