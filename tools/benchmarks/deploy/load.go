package deploy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/discovery/dns"
	"github.com/sluice-rpc/sluice/discovery/etcd"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/fleet"
)

// Bounds on the wait for a client to know and connect to the whole fleet,
// and for the calls out when the load stops beyond their deadline.
const (
	clientReadyLimit = 20 * time.Second
	drainSlack       = 5 * time.Second
)

// payload is every call's request body.
var payload = []byte("rolling-deploy")

// caller makes one call and returns the code it counts under and its
// error ("" and nil when it succeeded).
type caller func(ctx context.Context) (string, error)

// startClients starts cfg.Clients clients of the row's kind, each with its
// own resolver and connections, and waits until each knows every server
// and has connected to it. The closers close them.
func startClients(cfg Config, f *servers) (callers []caller, closers fleet.Closers, err error) {
	defer func() {
		if err != nil {
			closers.Close()
		}
	}()
	for range cfg.Clients {
		if f.row == RowTChannel {
			ch, err := tchannel.NewChannel("deploy-client", &tchannel.ChannelOptions{Logger: tchannel.NullLogger})
			if err != nil {
				return nil, closers, err
			}
			closers.Add(ch.Close)
			for _, in := range f.live {
				ch.Peers().Add(in.addr)
			}
			callers = append(callers, tchannelCaller(ch))
			continue
		}
		var opts []channel.ClientOption
		switch f.row {
		case RowEtcd:
			c, err := newEtcdClient(f.etcd)
			if err != nil {
				return nil, closers, err
			}
			closers = append(closers, c.Close)
			r, err := etcd.NewResolver(etcd.ResolverConfig{Client: c, Prefix: f.prefix})
			if err != nil {
				return nil, closers, err
			}
			opts = append(opts, channel.WithResolver(r))
		case RowDNS:
			r, err := dns.New(dns.Config{Target: f.zone.target(), Period: cfg.DNSPeriod.D(), MinInterval: cfg.DNSMinInterval.D()})
			if err != nil {
				return nil, closers, err
			}
			opts = append(opts, channel.WithResolver(r))
		}
		ch, err := channel.New("deploy-client")
		if err != nil {
			return nil, closers, err
		}
		closers.Add(ch.Close) // before its etcd client: the resolver stops first
		cl, err := ch.NewClient(Service, opts...)
		if err != nil {
			return nil, closers, err
		}
		if f.row == RowStatic {
			for _, in := range f.live {
				if err := cl.AddPeer(in.addr); err != nil {
					return nil, closers, err
				}
			}
		}
		if err := connect(cl, len(f.live)); err != nil {
			return nil, closers, err
		}
		callers = append(callers, func(ctx context.Context) (string, error) {
			_, err := cl.CallRaw(ctx, Method, nil, payload)
			return sluiceCode(err), err
		})
	}
	return callers, closers, nil
}

// connect waits until cl knows n peers and has connected to them.
func connect(cl *channel.Client, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), clientReadyLimit)
	defer cancel()
	for len(cl.Peers()) != n {
		if clock.Sleep(ctx, clock.Real, 5*time.Millisecond) != nil {
			return fmt.Errorf("deploy: the client knows %d peers of %s after %v, want %d", len(cl.Peers()), Service, clientReadyLimit, n)
		}
	}
	if err := cl.Connect(ctx); err != nil {
		return fmt.Errorf("deploy: the client's connections: %w", err)
	}
	return nil
}

// sluiceCode names a Sluice call's outcome (load.CodeOf), "" for a
// success.
func sluiceCode(err error) string {
	if err == nil {
		return ""
	}
	return load.CodeOf(err)
}

// tchannelCaller calls Method through a plain tchannel-go channel, on a
// peer its peer list chooses.
func tchannelCaller(ch *tchannel.Channel) caller {
	sc := ch.GetSubChannel(Service)
	return func(ctx context.Context) (string, error) {
		_, _, _, err := raw.CallSC(ctx, sc, Method, nil, payload)
		return tchannelCode(err), err
	}
}

// tchannelCode names a plain tchannel-go call's outcome: a system error's
// code; TIMEOUT for a deadline; NETWORK for a network error (a refused
// connection); else tchannel-go's reading (UNEXPECTED).
func tchannelCode(err error) string {
	var se tchannel.SystemError
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return codes.Code(se.Code()).String()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.Timeout.String()
	case errors.As(err, &ne):
		return codes.Network.String()
	}
	return codes.Code(tchannel.GetSystemErrorCode(err)).String()
}

// call is one call's record.
type call struct {
	at      time.Time // its arrival
	latency time.Duration
	code    string // "" when it succeeded
	err     error
}

// startLoad starts an open-loop load: call i arrives i/rate after the
// first and goes to callers[i mod len(callers)] with its own deadline.
// finish stops the arrivals and returns the calls that returned within
// drainSlack of the last one's deadline, and how many were still out
// then (hung: a client overran its deadline), left running.
func startLoad(rate float64, timeout time.Duration, callers []caller) (finish func() ([]call, int)) {
	var (
		calls      []call
		hung       int
		stop, done = make(chan struct{}), make(chan struct{})
	)
	go func() {
		defer close(done)
		calls, hung, _ = fleet.Load(time.Now(), rate, -1, stop, timeout+drainSlack, func(i int, _, at time.Time) call {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			code, err := callers[i%len(callers)](ctx)
			return call{at: at, latency: time.Since(at), code: code, err: err}
		})
	}()
	return func() ([]call, int) {
		close(stop)
		<-done
		return calls, hung
	}
}
