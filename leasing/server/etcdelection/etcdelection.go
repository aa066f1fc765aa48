// Package etcdelection elects the master of a Doorman node on etcd v3
// (3.4 or later): the servers forming the node campaign on one election
// key with etcd's election recipe (package
// go.etcd.io/etcd/client/v3/concurrency), each holding an etcd session, a
// lease kept alive while the server can reach etcd. It implements
// server.Election, so that package server itself links no etcd.
//
// # How long a cut-off master may serve
//
// A master that cannot reach etcd stops serving no later than TTL (the
// session's time to live, DefaultTTL unless configured) after it sent
// the last keep-alive etcd acknowledged. etcd keeps the session's lease,
// and with it the master's election key, at least TTL after it received
// that keep-alive, which is later; only when the key is gone may another
// server win. So a partitioned former master stops serving before a new
// one starts (given clocks that run at the same rate), and clients are
// left without a master for at most about TTL. A master that stops
// (Server.Stop) resigns, and another server takes over at once.
package etcdelection

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/sluice-rpc/sluice/internal/config"
	"github.com/sluice-rpc/sluice/leasing/server"
)

// DefaultTTL is the default session time to live: the bound on how long
// a master cut off from etcd keeps serving, and about how long a node is
// without a master after its master dies.
const DefaultTTL = 3 * time.Second

// DefaultDialTimeout bounds connecting to etcd.
const DefaultDialTimeout = 5 * time.Second

// Config configures an Election.
type Config struct {
	// Endpoints are etcd's client URLs (http://HOST:PORT). Required unless
	// Client is set.
	Endpoints []string
	// Client, if set, is used instead of dialling Endpoints; Close leaves
	// it open.
	Client *clientv3.Client
	// Key is the election key (a prefix: each candidate's key is below
	// it). Servers campaigning on the same key form one node. Required.
	Key string
	// TTL is the session's time to live, in whole seconds, at least 1 s
	// (0 means DefaultTTL). etcd may raise a TTL below its own minimum
	// (about 2 s with its default heartbeat).
	TTL time.Duration
	// DialTimeout bounds connecting to etcd (0 means DefaultDialTimeout).
	DialTimeout time.Duration
}

// Validate reports the first thing wrong with c, as a *retry.FieldError.
func (c Config) Validate() error {
	const pkg = "etcdelection"
	if c.Client == nil && len(c.Endpoints) == 0 {
		return config.Errorf(pkg, "Config.Endpoints", config.Verbatim("empty"), "must list etcd's client URLs (or Client be set)")
	}
	for i, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			return config.Errorf(pkg, "Config.Endpoints["+strconv.Itoa(i)+"]", e, "must be an etcd client URL")
		}
	}
	if strings.Trim(c.Key, "/") == "" {
		return config.Errorf(pkg, "Config.Key", c.Key, "must be an election key such as /doorman/root")
	}
	if c.TTL < 0 || c.TTL%time.Second != 0 || (c.TTL > 0 && c.TTL < time.Second) {
		return config.Errorf(pkg, "Config.TTL", c.TTL, "must be a whole number of seconds >= 1s (0 means the default, %v)", DefaultTTL)
	}
	if c.DialTimeout < 0 {
		return config.Errorf(pkg, "Config.DialTimeout", c.DialTimeout, "must be >= 0 (0 means the default, %v)", DefaultDialTimeout)
	}
	return nil
}

// Election is a server.Election on etcd. One Election serves one Server
// (one Run at a time).
type Election struct {
	cli     *clientv3.Client
	ownsCli bool
	key     string
	ttl     time.Duration

	wg        sync.WaitGroup // goroutines that may outlive a Run (see Close)
	closeOnce sync.Once
}

var _ server.Election = (*Election)(nil)

// New returns an election on etcd as cfg says. Close releases it.
func New(cfg Config) (*Election, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	e := &Election{cli: cfg.Client, key: "/" + strings.Trim(cfg.Key, "/"), ttl: cfg.TTL}
	if e.cli == nil {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   cfg.Endpoints,
			DialTimeout: cfg.DialTimeout,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("etcdelection: connect to etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
		}
		e.cli, e.ownsCli = cli, true
	}
	return e, nil
}

// TTL returns the session time to live: how long a master cut off from
// etcd may keep serving.
func (e *Election) TTL() time.Duration { return e.ttl }

// Close closes the etcd client New dialled and waits for the election's
// goroutines. Call it after the server has stopped. Later calls do
// nothing.
func (e *Election) Close() error {
	var err error
	e.closeOnce.Do(func() {
		if e.ownsCli {
			err = e.cli.Close()
			if errors.Is(err, context.Canceled) {
				err = nil // the client's own context, ended by Close
			}
		}
	})
	e.wg.Wait()
	return err
}

// errFenced is returned by Run when the master could not renew its
// session in time and stepped down.
var errFenced = errors.New("etcdelection: session not renewed within its TTL, stepped down")

// Run campaigns under id until ctx ends (see server.Election). It
// reports the master's address as it changes (the value of the oldest
// candidate's key), and this server's mastership when its campaign wins.
// As master it renews its session every TTL/3 and steps down (reports
// not master and returns an error) when TTL has passed since it sent the
// last renewal etcd acknowledged, or when etcd ends the session.
func (e *Election) Run(ctx context.Context, id string, report func(server.Mastership)) error {
	ttlSec := int(e.ttl / time.Second)
	sctx, cancel := context.WithTimeout(ctx, e.ttl)
	granted := time.Now()
	lease, err := e.cli.Grant(sctx, int64(ttlSec))
	cancel()
	if err != nil {
		return fmt.Errorf("etcdelection: create a session: %w", err)
	}
	// The lease lives at least its TTL after it was granted, which was
	// after granted.
	deadline := granted.Add(time.Duration(lease.TTL) * time.Second)
	sess, err := concurrency.NewSession(e.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(ttlSec))
	if err != nil {
		e.revoke(lease.ID)
		return fmt.Errorf("etcdelection: create a session: %w", err)
	}
	defer func() {
		sess.Orphan()
		e.revoke(lease.ID) // resign: the key goes with the lease
	}()
	el := concurrency.NewElection(sess, e.key)

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	leaders := el.Observe(rctx)
	won := make(chan error, 1)
	e.wg.Add(1)
	go func() {
		// Campaign may outlive Run when etcd is unreachable (it resigns on
		// the client's context): Close waits for it.
		defer e.wg.Done()
		won <- el.Campaign(rctx, id)
	}()
	renewed := make(chan time.Time, 1) // when a renewal etcd acknowledged was sent
	renewing := false
	renew := time.NewTicker(e.ttl / 3)
	defer renew.Stop()
	fence := time.NewTimer(time.Until(deadline))
	defer fence.Stop()

	master := false
	last := server.Mastership{}
	tell := func(m server.Mastership) {
		if m != last {
			last = m
			report(m)
		}
	}
	// However Run ends (its context ended: the server stops and resigns),
	// the server is told it is not the master before the deferred revoke
	// deletes the key: once it is gone another server may win, and the
	// Election contract is that losing is reported no later than that.
	// (Deferred calls run last first.)
	defer tell(server.Mastership{})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			tell(server.Mastership{})
			return errors.New("etcdelection: session ended (etcd unreachable for longer than its TTL)")
		case err := <-won:
			won = nil
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("etcdelection: campaign: %w", err)
			}
			if time.Now().After(deadline) {
				tell(server.Mastership{})
				return errFenced
			}
			master = true
			tell(server.Mastership{IsMaster: true, Master: id})
		case resp, ok := <-leaders:
			if !ok {
				leaders = nil
				if !master {
					if ctx.Err() != nil {
						return nil
					}
					return errors.New("etcdelection: observing the election ended (etcd unreachable?)")
				}
				continue
			}
			if master || len(resp.Kvs) == 0 {
				continue
			}
			leader := string(resp.Kvs[0].Value)
			if leader == id {
				leader = "" // our own key, from an older session or a campaign not yet returned
			}
			tell(server.Mastership{Master: leader})
		case <-renew.C:
			if renewing {
				continue
			}
			renewing = true
			e.wg.Add(1)
			go func(sent time.Time) {
				defer e.wg.Done()
				kctx, cancel := context.WithTimeout(rctx, e.ttl/3)
				resp, err := e.cli.KeepAliveOnce(kctx, lease.ID)
				cancel()
				if err != nil || resp.TTL <= 0 {
					sent = time.Time{}
				} else {
					sent = sent.Add(time.Duration(resp.TTL) * time.Second)
				}
				renewed <- sent
			}(time.Now())
		case until := <-renewed:
			renewing = false
			if !until.IsZero() && until.After(deadline) {
				deadline = until
				fence.Reset(time.Until(deadline))
			}
		case <-fence.C:
			if time.Now().Before(deadline) {
				fence.Reset(time.Until(deadline))
				continue
			}
			if master {
				tell(server.Mastership{})
				return errFenced
			}
		}
	}
}

// revoke ends the lease, deleting the election key with it, waiting at
// most a second (unrevoked, it expires after its TTL).
func (e *Election) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = e.cli.Revoke(ctx, id)
}
