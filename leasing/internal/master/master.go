// Package master finds the master of a Doorman node and keeps a
// connection to it: it asks a server with Discovery who the master is and
// follows the mastership redirects servers answer with. The leasing client
// and an intermediate server asking its parent for capacity share it.
//
// A Finder is not safe for concurrent use: its user serialises calls (the
// client and the server each hold a lock around their RPCs).
package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sluice-rpc/sluice/leasing/doormanpb"
)

// Finder keeps a connection to the master of the node whose member Addr
// is. The zero value is not usable: set the exported fields first.
type Finder struct {
	// Addr is the configured HOST:PORT of a server of the node; the
	// Finder returns to it after an error.
	Addr string
	// Dial opens a connection to a server; nil means gRPC with
	// DialOptions.
	Dial func(addr string) (pb.Conn, error)
	// DialOptions are used to dial servers when Dial is nil.
	DialOptions []grpc.DialOption
	// RPCTimeout bounds each Discovery RPC.
	RPCTimeout time.Duration
	// MaxRedirects bounds the redirects one call follows.
	MaxRedirects int
	// Prefix starts every error message ("leasing", "doorman server").
	Prefix string

	target string
	conn   pb.Conn
	known  bool // target is known to be the master
}

// ErrNoMaster is wrapped by the errors of a server that is not the master
// and does not know who is (an election in progress).
var ErrNoMaster = errors.New("not the master and does not know who is")

// Target returns the address the Finder talks to now.
func (f *Finder) Target() string {
	if f.target == "" {
		return f.Addr
	}
	return f.target
}

// Known reports whether the target is known to be the master.
func (f *Finder) Known() bool { return f.known }

// Conn returns a connection to the master, asking the current target with
// Discovery when it is not known to be the master.
func (f *Finder) Conn(ctx context.Context) (pb.Conn, error) {
	if f.target == "" {
		f.target = f.Addr
	}
	for redirects := 0; ; redirects++ {
		if f.conn == nil {
			conn, err := f.dial(f.target)
			if err != nil {
				return nil, fmt.Errorf("%s: dialling %s: %w", f.Prefix, f.target, err)
			}
			f.conn = conn
		}
		if f.known {
			return f.conn, nil
		}
		rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
		d, err := f.conn.Discovery(rctx, &pb.DiscoveryRequest{})
		cancel()
		if err != nil {
			target := f.target
			f.Forget()
			return nil, fmt.Errorf("%s: Discovery at %s: %w", f.Prefix, target, err)
		}
		if d.GetIsMaster() {
			f.known = true
			return f.conn, nil
		}
		if err := f.Redirect(d.GetMastership(), redirects); err != nil {
			return nil, err
		}
	}
}

// dial opens a connection to addr with Dial, or gRPC.
func (f *Finder) dial(addr string) (pb.Conn, error) {
	if f.Dial != nil {
		return f.Dial(addr)
	}
	return GRPC(addr, f.DialOptions...)
}

// GRPC dials addr with gRPC.
func GRPC(addr string, opts ...grpc.DialOption) (pb.Conn, error) {
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	return grpcConn{pb.NewCapacityClient(cc), cc}, nil
}

type grpcConn struct {
	pb.CapacityClient
	cc *grpc.ClientConn
}

func (c grpcConn) Close() error { return c.cc.Close() }

// Redirect switches to the master named by m, the redirects'th redirect
// of this call. With no address in m, or too many redirects, it forgets
// the target and returns an error.
func (f *Finder) Redirect(m *pb.Mastership, redirects int) error {
	addr := m.GetMasterAddress()
	if addr == "" {
		target := f.Target()
		f.Forget()
		return fmt.Errorf("%s: server %s is %w", f.Prefix, target, ErrNoMaster)
	}
	if redirects >= f.MaxRedirects {
		f.Forget()
		return fmt.Errorf("%s: gave up after %d mastership redirects (last to %s)", f.Prefix, redirects, addr)
	}
	f.SetTarget(addr, true)
	return nil
}

// SetTarget points the Finder at addr, known to be the master or not.
func (f *Finder) SetTarget(addr string, master bool) {
	if addr != f.target && f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	f.target = addr
	f.known = master
}

// Forget drops the connection and goes back to the configured address.
func (f *Finder) Forget() {
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	f.target = f.Addr
	f.known = false
}

// Call sends one RPC to the master: call makes it on conn and returns the
// answer's mastership field when the answer is a redirect (nil when it is
// an answer). Call follows redirects, and after an error that may be the
// connection's or the server's (see Rejected) rediscovers the master and
// tries once more at once (the connection may have been a stale one, to
// a server since restarted). An error that rejects the request itself,
// such as InvalidArgument or ResourceExhausted, is returned at once, the
// connection kept: asking again, anywhere, would be rejected again. An
// RPC's error is returned as "PREFIX: RPC to TARGET: ERR".
func (f *Finder) Call(ctx context.Context, rpc string, call func(ctx context.Context, conn pb.Conn) (*pb.Mastership, error)) error {
	retried := false
	for redirects := 0; ; redirects++ {
		conn, err := f.Conn(ctx)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, f.RPCTimeout)
		m, err := call(rctx, conn)
		cancel()
		if err != nil {
			target := f.Target()
			if Rejected(err) {
				return fmt.Errorf("%s: %s to %s: %w", f.Prefix, rpc, target, err)
			}
			f.Forget()
			if !retried && ctx.Err() == nil {
				retried = true
				continue
			}
			return fmt.Errorf("%s: %s to %s: %w", f.Prefix, rpc, target, err)
		}
		if m == nil {
			return nil
		}
		if err := f.Redirect(m, redirects); err != nil {
			return err
		}
	}
}

// Rejected reports whether err is a server's answer that rejects the
// request itself (its gRPC code is InvalidArgument, ResourceExhausted,
// FailedPrecondition, OutOfRange, PermissionDenied, Unauthenticated,
// NotFound or AlreadyExists): the same request would be rejected again,
// by this server or another, so it is no reason to rediscover the master
// or retry. Other errors (Unavailable, DeadlineExceeded, Unknown, ...)
// may be the connection's or a server's passing state.
func Rejected(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.ResourceExhausted, codes.FailedPrecondition, codes.OutOfRange,
		codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.AlreadyExists:
		return true
	}
	return false
}
