package etcd

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/discovery"
)

// Resolver follows the peers under one etcd prefix (see the package doc
// for the layout, the resyncs and their bounds). It is safe for concurrent
// use; each Resolve follows the prefix on its own.
type Resolver struct {
	cfg  ResolverConfig // defaults applied
	name string
}

var _ discovery.Resolver = (*Resolver)(nil)

// NewResolver returns a Resolver as cfg says.
func NewResolver(cfg ResolverConfig) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Resolver{cfg: cfg, name: targetName(cfg.Client, cfg.Prefix)}, nil
}

// String returns etcd://<the client's endpoints>/<prefix>, the form
// ParseTarget reads.
func (r *Resolver) String() string { return r.name }

// Resolve reads and watches the prefix until ctx ends, reporting the whole
// set to u after each read and each watch response with events, and each
// failure to read or watch, and each key whose value it cannot read. It
// ignores u.ResolveNow: it is told of every change.
func (r *Resolver) Resolve(ctx context.Context, u discovery.Updates) {
	f := &follower{cfg: &r.cfg, u: u, entries: map[string]entry{}}
	failures := 0 // in a row, for the backoff
	for ctx.Err() == nil {
		if failures > 0 && clock.Sleep(ctx, r.cfg.Clock, r.cfg.Backoff.Delay(failures, rand.Float64())) != nil {
			return
		}
		rev, err := f.read(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			f.fail(err)
			failures++
			continue
		}
		var created time.Time
		err = f.watch(ctx, rev, func() { created = r.cfg.Clock.Now() })
		// A watch that lasted longer than the backoff's longest wait
		// worked: the backoff starts again. One that ends at once (etcd
		// cancels every watch) is not, or each round would wait only the
		// backoff's first step.
		if !created.IsZero() && r.cfg.Clock.Since(created) >= r.cfg.Backoff.Max {
			failures = 0
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errResync):
			// Not a failure: read again at once.
		case errors.Is(err, errCompacted):
			// Not a failure either, but counted for the backoff, in case
			// etcd compacts past every revision read.
			failures++
		default:
			f.fail(err)
			failures++
		}
	}
}

var (
	// errResync ends a watch to read the prefix afresh (ResyncInterval).
	errResync = errors.New("etcd: periodic resync")
	// errCompacted ends a watch that etcd compacted past.
	errCompacted = errors.New("etcd: the watch's revisions were compacted")
	// ErrOverCap is the error a Resolver reports (wrapped, with the
	// prefix, the bound and the set that stays) when its prefix holds
	// more keys than ResolverConfig.MaxKeys, or more bytes than MaxBytes.
	ErrOverCap = errors.New("etcd: the registry is over its cap")
)

// entry is one key's peer, or why its value was left out, and the size of
// its key and value (0 for one left out unread).
type entry struct {
	addr discovery.Address
	err  error
	size int
}

// follower is one Resolve's view of the prefix.
type follower struct {
	cfg     *ResolverConfig
	u       discovery.Updates
	entries map[string]entry // by key (keyName)
	bytes   int              // the entries' sizes, summed
	// rev is the highest store revision seen: a later answer below it
	// comes from another store.
	rev int64
	// last is the set last reported by Update; reported says whether
	// there was one, and failed whether an Error came after it.
	last     []discovery.Address
	reported bool
	failed   bool
}

// readPage is how many keys one Get of a read asks for. etcd holds values
// up to its request limit (1.5 MiB by default), so one answer holds at
// most about 24 MiB whatever the registry holds, and a prefix of
// DefaultMaxKeys keys is read in 626 Gets.
const readPage = 16

// read gets the prefix, a page at a time at one revision, replaces the set
// with what it holds, reports it, and returns the revision it was read
// at. A prefix over MaxKeys or MaxBytes is an error: f keeps nothing of
// it, and reports nothing.
func (f *follower) read(ctx context.Context) (int64, error) {
	f.forget()
	from, end := f.cfg.Prefix+"/", clientv3.GetPrefixRangeEnd(f.cfg.Prefix+"/")
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(readPage)}
		if rev != 0 {
			// The later pages at the first one's revision: one snapshot.
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := f.get(ctx, from, opts)
		if err != nil {
			f.forget()
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
			// Count is every key in the range, whatever the limit.
			if resp.Count > int64(f.cfg.MaxKeys) {
				f.forget()
				return 0, f.overCap(fmt.Sprintf("%d keys, more than ResolverConfig.MaxKeys (%d)", resp.Count, f.cfg.MaxKeys))
			}
		}
		for _, kv := range resp.Kvs {
			f.put(kv.Key, kv.Value)
		}
		if f.bytes > f.cfg.MaxBytes {
			f.forget()
			return 0, f.overCap(fmt.Sprintf("more than ResolverConfig.MaxBytes (%d) of keys and values", f.cfg.MaxBytes))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	// The read is the truth, even when its revision is below rev: etcd
	// came back with another store.
	f.rev = rev
	f.report()
	return rev, nil
}

// get is one Get of a read, within Timeout.
func (f *follower) get(ctx context.Context, from string, opts []clientv3.OpOption) (*clientv3.GetResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	resp, err := f.cfg.Client.Get(rctx, from, opts...)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("etcd: reading %s/: no answer within %v (etcd unreachable?)", f.cfg.Prefix, f.cfg.Timeout)
		}
		return nil, fmt.Errorf("etcd: reading %s/: %w", f.cfg.Prefix, err)
	}
	return resp, nil
}

// overCap returns the error of a prefix holding what (over a cap), saying
// which set stays in force.
func (f *follower) overCap(what string) error {
	stays := "no set was read yet, so there are no peers"
	if f.reported {
		stays = fmt.Sprintf("the last set read (%d peers) stays", len(f.last))
	}
	return fmt.Errorf("%w: %s/ holds %s; %s", ErrOverCap, f.cfg.Prefix, what, stays)
}

// watch follows the prefix from the revision after rev until the watch
// has to be given up (or ctx ends), and says why. created is called once
// etcd has set the watch up.
func (f *follower) watch(ctx context.Context, rev int64, created func()) error {
	cli, every := f.cfg.Client, f.cfg.CheckInterval
	// The watch requires a leader: a member cut off from its cluster ends
	// it rather than serve a stale view.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	// clientv3's Watch returns once etcd has set the watch up, which it
	// never does while unreachable: it runs on a goroutine of its own,
	// while the checks below run (until wch arrives, the watch is nil
	// and sends nothing).
	var wch clientv3.WatchChan
	starting := make(chan clientv3.WatchChan, 1)
	go func() {
		starting <- cli.Watch(wctx, f.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
	}()
	defer func() {
		cancel() // Watch returns at once
		if starting != nil {
			<-starting
		}
	}()
	check := f.cfg.Clock.NewTimer(every)
	defer func() { check.Stop() }()
	var resync <-chan time.Time
	if f.cfg.ResyncInterval > 0 {
		t := f.cfg.Clock.NewTimer(f.cfg.ResyncInterval)
		defer t.Stop()
		resync = t.C()
	}
	asked := false // a progress request is unanswered
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-resync:
			return errResync
		case wch = <-starting:
			starting = nil
		case wr, ok := <-wch:
			switch {
			case !ok:
				return fmt.Errorf("etcd: the watch on %s/ closed", f.cfg.Prefix)
			case wr.CompactRevision != 0:
				return errCompacted
			case wr.Err() != nil:
				return fmt.Errorf("etcd: watching %s/: %w", f.cfg.Prefix, wr.Err())
			case wr.Canceled:
				return fmt.Errorf("etcd: etcd cancelled the watch on %s/", f.cfg.Prefix)
			case wr.Created:
				// Its header may come from a member a little behind the
				// one that answered the read: no comparison.
				created()
			case wr.Header.Revision != 0 && wr.Header.Revision < f.rev:
				// (A member of a cluster lagging behind the one that
				// answered the read could answer below it too, for a
				// moment: the price of a false alarm is one read.)
				return fmt.Errorf("etcd: etcd's revision went back from %d to %d: it came back with another store (a new data directory?); reading %s/ afresh",
					f.rev, wr.Header.Revision, f.cfg.Prefix)
			}
			asked = false
			f.rev = max(f.rev, wr.Header.Revision)
			for _, ev := range wr.Events {
				switch ev.Type {
				case clientv3.EventTypePut:
					f.put(ev.Kv.Key, ev.Kv.Value)
				case clientv3.EventTypeDelete:
					f.remove(f.keyName(ev.Kv.Key))
				}
				f.rev = max(f.rev, ev.Kv.ModRevision)
			}
			// Over a cap, the watch ends: the read that follows fails
			// (or finds the prefix back under it), and the set of the
			// last good read stays meanwhile.
			switch {
			case len(f.entries) > f.cfg.MaxKeys:
				n := len(f.entries)
				f.forget()
				return f.overCap(fmt.Sprintf("%d keys, more than ResolverConfig.MaxKeys (%d)", n, f.cfg.MaxKeys))
			case f.bytes > f.cfg.MaxBytes:
				f.forget()
				return f.overCap(fmt.Sprintf("more than ResolverConfig.MaxBytes (%d) of keys and values", f.cfg.MaxBytes))
			}
			if len(wr.Events) > 0 {
				f.report()
			}
		case <-check.C():
			if asked {
				return fmt.Errorf("etcd: no answer on the watch of %s/ to a progress request within %v", f.cfg.Prefix, every)
			}
			// The request goes on the watch's own stream (the one of
			// wctx's metadata); a stream stuck reconnecting does not take
			// it.
			pctx, pcancel := context.WithTimeout(wctx, every)
			err := cli.RequestProgress(pctx)
			pcancel()
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("etcd: the watch on %s/ took no progress request within %v (etcd unreachable?)", f.cfg.Prefix, every)
			}
			if err != nil {
				return fmt.Errorf("etcd: asking for the progress of the watch on %s/: %w", f.cfg.Prefix, err)
			}
			asked = true
			check = f.cfg.Clock.NewTimer(every)
		}
	}
}

// put records the peer in key's value, or why it is left out. A key or
// value over MaxValueSize is left out unread: neither decoded nor kept.
func (f *follower) put(key, value []byte) {
	name := f.keyName(key)
	f.remove(name)
	limit := f.cfg.MaxValueSize
	switch {
	case len(key) > limit:
		f.entries[name] = entry{err: fmt.Errorf("etcd: key %s: the key is %d bytes, more than ResolverConfig.MaxValueSize (%d): left out unread", name, len(key), limit)}
	case len(value) > limit:
		f.entries[name] = entry{err: fmt.Errorf("etcd: key %q: the value is %d bytes, more than ResolverConfig.MaxValueSize (%d): left out unread", name, len(value), limit)}
	default:
		a, err := decode(name, value)
		size := len(key) + len(value)
		f.entries[name] = entry{a, err, size}
		f.bytes += size
	}
}

// forget drops every entry.
func (f *follower) forget() {
	clear(f.entries)
	f.bytes = 0
}

// remove forgets the entry of the key named name.
func (f *follower) remove(name string) {
	f.bytes -= f.entries[name].size
	delete(f.entries, name)
}

// keyName is the name f keeps key under: key itself, or for a key over
// MaxValueSize, its first bytes and a digest of the whole (quoted), so
// that neither the map nor an error holds an attacker's megabyte. A
// delete of the same key finds the same name.
func (f *follower) keyName(key []byte) string {
	if len(key) <= f.cfg.MaxValueSize {
		return string(key)
	}
	sum := sha256.Sum256(key)
	return fmt.Sprintf("%q... (sha256 %x)", key[:min(len(key), 64)], sum[:8])
}

// report reports the set, unless it is the one last reported and nothing
// failed since, then the keys left out of it, if any.
func (f *follower) report() {
	keys := make([]string, 0, len(f.entries))
	for k := range f.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	set := make([]discovery.Address, 0, len(keys))
	var first error
	var bad []string // the keys left out after the first
	for _, k := range keys {
		switch e := f.entries[k]; {
		case e.err == nil:
			set = append(set, e.addr)
		case first == nil:
			first = e.err
		default:
			bad = append(bad, k)
		}
	}
	switch {
	case len(set) == 0 && first != nil:
		// Every key left out: the registry's answer is unusable, not an
		// empty service. The error alone, so that a client that never
		// had peers says why (a call waiting for them reports it), and
		// one that had keeps them.
	case !f.reported || f.failed || !reflect.DeepEqual(set, f.last):
		f.u.Update(set)
		f.last, f.reported, f.failed = set, true, false
	}
	reported := fmt.Sprintf("the other %d peers reported", len(set))
	if len(set) == 0 {
		reported = "no set reported, as no key holds a peer"
	}
	switch {
	case first == nil:
	case len(bad) == 0:
		f.fail(fmt.Errorf("%w; left out, %s", first, reported))
	default:
		n := len(bad)
		if n > 3 {
			bad = append(bad[:3:3], "...")
		}
		f.fail(fmt.Errorf("%w; left out with %d more keys (%s), %s",
			first, n, strings.Join(bad, ", "), reported))
	}
}

func (f *follower) fail(err error) {
	f.u.Error(err)
	f.failed = true
}
