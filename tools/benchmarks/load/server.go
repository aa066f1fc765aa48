package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/clock"
	tjson "github.com/uber/tchannel-go/json"
)

// ServerConfig configures embedded servers.
type ServerConfig struct {
	// Service and Method are what the servers serve. Required.
	Service, Method string
	// Format is "raw" (echo arg3, the default) or "json".
	Format string
	// Shape is each request's latency, drawn from server i's source
	// seeded with Seed+i.
	Shape Shape
	Seed  uint64
	// Workers, when > 0, gives each server a Pool of that many workers
	// and an unbounded queue; 0: every request waits out its latency.
	Workers int
	// Shed, if not nil, is the servers' load shedding; Options go to each
	// server's Channel after it.
	Shed    *channel.ShedConfig
	Options []channel.Option
}

// MaxServers bounds StartServers' n, MaxWorkers ServerConfig.Workers.
const (
	MaxServers = 64
	MaxWorkers = 100_000
)

// Servers are embedded TChannel servers on 127.0.0.1 whose handler waits a
// time drawn from a Shape, or until the call is cancelled (a cancelled
// hedge stops its server's work), then answers.
type Servers struct {
	cfg                           ServerConfig
	servers                       []*server
	received, inFlight, maxFlight atomic.Int64
}

// server is one of Servers: its Channel, latency source, and Pool (when
// ServerConfig.Workers > 0).
type server struct {
	ch   *channel.Channel
	mu   sync.Mutex // guards rng
	rng  *rand.Rand
	pool *Pool
}

// StartServers starts n servers (1 <= n <= MaxServers) on 127.0.0.1 with
// free ports. Close them when done.
func StartServers(n int, cfg ServerConfig) (*Servers, error) {
	switch {
	case n < 1 || n > MaxServers:
		return nil, fmt.Errorf("load: %d servers, must be in [1, %d]", n, MaxServers)
	case cfg.Service == "" || cfg.Method == "":
		return nil, errors.New("load: servers need a service and a method")
	case cfg.Format != "" && cfg.Format != "raw" && cfg.Format != "json":
		return nil, fmt.Errorf("load: server format %q, must be raw or json", cfg.Format)
	case cfg.Workers < 0 || cfg.Workers > MaxWorkers:
		return nil, fmt.Errorf("load: %d workers per server, must be in [0, %d]", cfg.Workers, MaxWorkers)
	}
	if err := cfg.Shape.Validate(); err != nil {
		return nil, err
	}
	s := &Servers{cfg: cfg}
	for i := range n {
		if err := s.start(i); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// start starts server i.
func (s *Servers) start(i int) error {
	srv := &server{rng: rand.New(rand.NewPCG(s.cfg.Seed+uint64(i), 0x5eed))}
	if s.cfg.Workers > 0 {
		var err error
		if srv.pool, err = NewPool(PoolConfig{Workers: s.cfg.Workers}); err != nil {
			return err
		}
	}
	var opts []channel.Option
	if s.cfg.Shed != nil {
		opts = append(opts, channel.WithShedding(*s.cfg.Shed))
	}
	ch, err := channel.New(s.cfg.Service, append(opts, s.cfg.Options...)...)
	if err != nil {
		return err
	}
	srv.ch = ch
	s.servers = append(s.servers, srv)
	if s.cfg.Format == "json" {
		err = ch.RegisterJSON(map[string]any{
			s.cfg.Method: func(ctx tjson.Context, req map[string]any) (map[string]any, error) {
				s.serve(ctx, srv)
				return req, nil
			},
		})
	} else {
		err = ch.RegisterRaw(s.cfg.Method, func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
			s.serve(ctx, srv)
			return &channel.RawResponse{Arg3: req.Arg3}, nil
		})
	}
	if err != nil {
		return err
	}
	return ch.ListenAndServe("127.0.0.1:0")
}

// serve waits out one request's latency on srv.
func (s *Servers) serve(ctx context.Context, srv *server) {
	s.received.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxFlight.Load(); n > m && !s.maxFlight.CompareAndSwap(m, n); m = s.maxFlight.Load() {
	}
	srv.mu.Lock()
	d := s.cfg.Shape.Sample(srv.rng)
	srv.mu.Unlock()
	if srv.pool == nil {
		clock.Sleep(ctx, clock.Real, d)
	} else {
		srv.pool.Serve(ctx, d)
	}
}

// HostPorts returns the servers' addresses.
func (s *Servers) HostPorts() []string {
	hps := make([]string, len(s.servers))
	for i, srv := range s.servers {
		hps[i] = srv.ch.HostPort()
	}
	return hps
}

// Received returns the requests the servers have taken.
func (s *Servers) Received() int64 { return s.received.Load() }

// MaxInFlight returns the most requests the servers handled at once.
func (s *Servers) MaxInFlight() int64 { return s.maxFlight.Load() }

// Close stops the servers and waits for their connections to close.
func (s *Servers) Close() {
	for _, srv := range s.servers {
		srv.ch.Close()
	}
}

// NewClient returns a Channel named name with opts, and its Client of
// service with hostPorts as peers; closing the Channel closes the Client.
func NewClient(name, service string, hostPorts []string, opts ...channel.Option) (*channel.Channel, *channel.Client, error) {
	ch, err := channel.New(name, opts...)
	if err != nil {
		return nil, nil, err
	}
	client, err := ch.NewClient(service)
	for _, hp := range hostPorts {
		if err == nil {
			err = client.AddPeer(hp)
		}
	}
	if err != nil {
		ch.Close()
		return nil, nil, err
	}
	return ch, client, nil
}
