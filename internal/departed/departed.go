// Package departed remembers, for a grace, what a pool or a peer list
// knew of the host:ports that left it, bounded in count, so that a peer
// coming back within the grace takes its state up again and addresses
// rotating through a registry cannot grow it without bound.
package departed

import (
	"sync"
	"time"
)

// Table keeps a value for each host:port that left, for a grace
// after it left and at most max of them (past max, the oldest go first):
// what a Pool or List remembers of a peer that is gone, dropped once it
// has been gone for a while, so that addresses rotating through a
// registry cannot grow it without bound. Every operation takes constant
// amortized time, whatever the count. Not safe for concurrent use.
type Table[V any] struct {
	grace time.Duration
	max   int
	m     map[string]departed[V]
	q     []departure // in the order put; an entry m no longer holds is skipped
	head  int         // q[:head] are done
	seq   uint64
}

type departed[V any] struct {
	v   V
	at  time.Time
	seq uint64
}

type departure struct {
	hostPort string
	at       time.Time
	seq      uint64
}

// SweepEvery is how often, on the wall clock, the holder of a Table
// prunes it while it holds any, so that they are dropped even when
// nothing else happens (no peer joins or leaves): within the grace plus
// this of their departure.
const SweepEvery = 15 * time.Second

// Sweeper prunes a Table every SweepEvery (its Every) while it holds any: arm
// it (under the lock guarding the Table) after each Put; stop it
// once it is no longer wanted.
type Sweeper struct {
	Every time.Duration // SweepEvery; tests shorten it
	t     *time.Timer
	done  bool
}

// Arm starts the timer unless it runs or nothing is held; prune runs
// under lock when it fires, and arms it again.
func (s *Sweeper) Arm(held int, lock sync.Locker, prune func() int) {
	if s.t != nil || s.done || held == 0 {
		return
	}
	s.t = time.AfterFunc(s.Every, func() {
		lock.Lock()
		defer lock.Unlock()
		s.t = nil
		s.Arm(prune(), lock, prune)
	})
}

// Stop stops the timer for good (lock held).
func (s *Sweeper) Stop() {
	s.done = true
	if s.t != nil {
		s.t.Stop()
		s.t = nil
	}
}

// New returns an empty Table holding each host:port for grace after it
// left, and at most max of them.
func New[V any](grace time.Duration, max int) *Table[V] {
	return &Table[V]{grace: grace, max: max, m: map[string]departed[V]{}}
}

// Put records v for hostPort, which left at now.
func (d *Table[V]) Put(hostPort string, v V, now time.Time) {
	d.Prune(now)
	d.seq++
	d.m[hostPort] = departed[V]{v: v, at: now, seq: d.seq}
	d.q = append(d.q, departure{hostPort: hostPort, at: now, seq: d.seq})
	for len(d.m) > d.max {
		d.pop()
	}
}

// Get returns what was recorded for hostPort if it left less than the
// grace before now.
func (d *Table[V]) Get(hostPort string, now time.Time) (V, bool) {
	e, ok := d.m[hostPort]
	if !ok || now.Sub(e.at) >= d.grace {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Take is Get, forgetting hostPort.
func (d *Table[V]) Take(hostPort string, now time.Time) (V, bool) {
	v, ok := d.Get(hostPort, now)
	delete(d.m, hostPort)
	d.Prune(now)
	return v, ok
}

// Len returns how many host:ports are remembered.
func (d *Table[V]) Len() int { return len(d.m) }

// Prune forgets the host:ports that left at least the grace before now.
func (d *Table[V]) Prune(now time.Time) {
	for d.head < len(d.q) {
		e := d.q[d.head]
		if live, ok := d.m[e.hostPort]; ok && live.seq == e.seq && now.Sub(e.at) < d.grace {
			break
		}
		d.pop()
	}
}

// pop forgets the oldest entry of the queue, and its host:port if it is
// still the one recorded.
func (d *Table[V]) pop() {
	e := d.q[d.head]
	if live, ok := d.m[e.hostPort]; ok && live.seq == e.seq {
		delete(d.m, e.hostPort)
	}
	d.q[d.head] = departure{}
	d.head++
	if d.head == len(d.q) {
		d.q, d.head = d.q[:0], 0
	} else if d.head > 64 && d.head > len(d.q)/2 {
		d.q = append(d.q[:0], d.q[d.head:]...)
		d.head = 0
	}
}
