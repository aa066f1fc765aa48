// Package etcdconfig keeps a Doorman server's configuration in an etcd v3
// key, as the original's -config=etcd:KEY does: the server loads the key's
// value at start (Load) and applies every later value (Watch) through a
// server.Reloader, which refuses an invalid one whole and keeps the
// configuration in force. The value is the same YAML (or JSON) as a
// configuration file.
//
// It is a package of its own so that a program embedding the server
// without etcd (package leasing/server) links no etcd client.
package etcdconfig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/leasing/server"
)

// retryBackoff is the wait before the next attempt to read or watch the
// key after failures in a row (etcd unreachable, no leader, a compacted
// revision): 100 ms doubled per failure, at most 5 s, each wait drawn
// from the upper half of that (equal jitter), so that the servers
// watching one key do not all come back together after an etcd outage.
var retryBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2,
	Jitter: backoff.EqualJitter}

// Load reads and parses the configuration in key. It returns it with the
// revision of the etcd store it was read at, from which Watch goes on. A
// missing key, an empty value or an invalid configuration is an error
// naming the key.
func Load(ctx context.Context, cli *clientv3.Client, key string) (*server.Repository, int64, error) {
	data, rev, err := Read(ctx, cli, key)
	if err != nil {
		return nil, 0, err
	}
	repo, err := server.ParseRepository(data)
	if err != nil {
		return nil, 0, fmt.Errorf("etcdconfig: etcd key %q: %w", key, err)
	}
	return repo, rev, nil
}

// Read returns the value of key, unparsed (for Reloader.Loaded), and the
// revision it was read at. A missing key, an empty value or one larger
// than server.MaxConfigSize is an error naming the key.
func Read(ctx context.Context, cli *clientv3.Client, key string) ([]byte, int64, error) {
	if err := check(cli, key); err != nil {
		return nil, 0, err
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("etcdconfig: reading etcd key %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 || len(resp.Kvs[0].Value) == 0 {
		return nil, 0, fmt.Errorf("etcdconfig: etcd key %q holds no configuration: put the YAML of one there first", key)
	}
	if n := len(resp.Kvs[0].Value); n > server.MaxConfigSize {
		return nil, 0, fmt.Errorf("etcdconfig: etcd key %q holds %d bytes, more than the limit of %d", key, n, server.MaxConfigSize)
	}
	return resp.Kvs[0].Value, resp.Header.Revision, nil
}

func check(cli *clientv3.Client, key string) error {
	if cli == nil {
		return errors.New("etcdconfig: the etcd client is nil")
	}
	if key == "" {
		return errors.New("etcdconfig: the etcd key is empty, want the key holding the configuration")
	}
	return nil
}

// Watch applies every value put in key after revision rev (as Load
// returned it) to r's server, until ctx ends; it returns nil then. With
// rev 0 it first reads the key and applies its value. A deleted key, a
// value that is not a valid configuration and a lost connection are
// logged through r, and the configuration in force stays. When etcd has
// compacted the revisions it had not seen yet, it reads the key afresh.
// The watch requires an etcd leader, so that a member cut off from its
// cluster is noticed rather than silently stale.
func Watch(ctx context.Context, cli *clientv3.Client, key string, rev int64, r *server.Reloader) error {
	if err := check(cli, key); err != nil {
		return err
	}
	if r == nil {
		return errors.New("etcdconfig: the Reloader is nil")
	}
	origin := fmt.Sprintf("etcd key %q", key)
	failures := 0
	for ctx.Err() == nil {
		if rev == 0 {
			resp, err := cli.Get(ctx, key)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				r.Failed(fmt.Errorf("etcdconfig: reading %s: %w", origin, err))
				failures = wait(ctx, failures)
				continue
			case len(resp.Kvs) > 0:
				apply(r, resp.Kvs[0].Value, origin)
			}
			rev = resp.Header.Revision
			failures = 0 // etcd answered: a later failure starts the backoff afresh
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cli.Watch(wctx, key, clientv3.WithRev(rev+1)) {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision != 0 {
					rev = 0 // read the key afresh
				}
				if ctx.Err() == nil {
					r.Failed(fmt.Errorf("etcdconfig: watching %s: %w", origin, err))
				}
				break
			}
			failures = 0
			for _, ev := range wr.Events {
				rev = ev.Kv.ModRevision
				if ev.Type == clientv3.EventTypeDelete {
					r.Failed(fmt.Errorf("etcdconfig: %s was deleted", origin))
					continue
				}
				apply(r, ev.Kv.Value, origin)
			}
		}
		cancel()
		if ctx.Err() == nil {
			failures = wait(ctx, failures)
		}
	}
	return nil
}

func apply(r *server.Reloader, data []byte, origin string) {
	if len(data) > server.MaxConfigSize {
		r.Failed(fmt.Errorf("etcdconfig: %s holds %d bytes, more than the limit of %d", origin, len(data), server.MaxConfigSize))
		return
	}
	_ = r.Apply(data, origin) // logged by r
}

// wait waits the backoff after one more failure than failures, or until
// ctx ends, and returns the failures counted now.
func wait(ctx context.Context, failures int) int {
	failures++
	t := time.NewTimer(retryBackoff.Delay(failures, rand.Float64()))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return failures
}
