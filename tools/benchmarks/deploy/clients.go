package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/uber/tchannel-go"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/discovery/dns"
)

// clientReadyLimit bounds the wait for a client to know and connect to the
// whole fleet before the load starts.
const clientReadyLimit = 20 * time.Second

// clientName is the clients' TChannel service name.
const clientName = "deploy-client"

// clients are a row's clients, each a Channel and its Client of Service
// (or a plain tchannel-go channel) of its own, with its own resolver.
type clients struct {
	callers []caller
	closers []func()
}

// startClients starts cfg.Clients clients of the row's kind for f's fleet
// and waits until each knows every server and has connected to it.
func startClients(cfg Config, f *fleet) (_ *clients, err error) {
	cs := &clients{}
	defer func() {
		if err != nil {
			cs.close()
		}
	}()
	for range cfg.Clients {
		if f.row == RowTChannel {
			ch, err := tchannel.NewChannel(clientName, &tchannel.ChannelOptions{Logger: tchannel.NullLogger})
			if err != nil {
				return nil, err
			}
			cs.closers = append(cs.closers, ch.Close)
			for _, hp := range f.hostPorts() {
				ch.Peers().Add(hp)
			}
			cs.callers = append(cs.callers, tchannelCaller(ch))
			continue
		}
		var opts []channel.ClientOption
		switch f.row {
		case RowEtcd:
			c, err := newEtcdClient(f.etcd)
			if err != nil {
				return nil, err
			}
			cs.closers = append(cs.closers, func() { c.Close() })
			r, err := newEtcdResolver(c, f.prefix)
			if err != nil {
				return nil, err
			}
			opts = append(opts, channel.WithResolver(r))
		case RowDNS:
			r, err := dns.New(dns.Config{Target: f.zone.target(), Period: cfg.DNSPeriod.D(), MinInterval: cfg.DNSMinInterval.D()})
			if err != nil {
				return nil, err
			}
			opts = append(opts, channel.WithResolver(r))
		}
		ch, err := channel.New(clientName)
		if err != nil {
			return nil, err
		}
		// Closed before its etcd client: the resolver stops first.
		cs.closers = append(cs.closers, ch.Close)
		cl, err := ch.NewClient(Service, opts...)
		if err != nil {
			return nil, err
		}
		if f.row == RowStatic {
			for _, hp := range f.hostPorts() {
				if err := cl.AddPeer(hp); err != nil {
					return nil, err
				}
			}
		}
		if err := connect(cl, len(f.live)); err != nil {
			return nil, err
		}
		cs.callers = append(cs.callers, sluiceCaller(cl))
	}
	return cs, nil
}

// connect waits until cl knows n peers and has connected to them.
func connect(cl *channel.Client, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), clientReadyLimit)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(cl.Peers()) != n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("deploy: the client knows %d peers of %s after %v, want %d", len(cl.Peers()), Service, clientReadyLimit, n)
		}
	}
	if err := cl.Connect(ctx); err != nil {
		return fmt.Errorf("deploy: the client's connections: %w", err)
	}
	return nil
}

// close closes the clients, last started first.
func (cs *clients) close() {
	for i := len(cs.closers) - 1; i >= 0; i-- {
		cs.closers[i]()
	}
	cs.closers = nil
}
