package peer

import (
	"sync"
	"time"
)

// departures keeps a value for each host:port that left, for a grace
// after it left and at most max of them (past max, the oldest go first):
// what a Pool or List remembers of a peer that is gone, dropped once it
// has been gone for a while, so that addresses rotating through a
// registry cannot grow it without bound. Every operation takes constant
// amortized time, whatever the count. Not safe for concurrent use.
type departures[V any] struct {
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

// sweepEvery is how often, on the wall clock, the holder of departures
// prunes them while they hold any, so that they are dropped even when
// nothing else happens (no peer joins or leaves): within the grace plus
// this of their departure.
const sweepEvery = 15 * time.Second

// sweeper prunes a departures every sweepEvery while it holds any: arm
// it (under the lock guarding the departures) after each put; stop it
// once they are no longer wanted.
type sweeper struct {
	every time.Duration // sweepEvery; tests shorten it
	t     *time.Timer
	done  bool
}

// arm starts the timer unless it runs or nothing is held; prune runs
// under lock when it fires, and arms it again.
func (s *sweeper) arm(held int, lock sync.Locker, prune func() int) {
	if s.t != nil || s.done || held == 0 {
		return
	}
	s.t = time.AfterFunc(s.every, func() {
		lock.Lock()
		defer lock.Unlock()
		s.t = nil
		s.arm(prune(), lock, prune)
	})
}

// stop stops the timer for good (lock held).
func (s *sweeper) stop() {
	s.done = true
	if s.t != nil {
		s.t.Stop()
		s.t = nil
	}
}

func newDepartures[V any](grace time.Duration, max int) *departures[V] {
	return &departures[V]{grace: grace, max: max, m: map[string]departed[V]{}}
}

// put records v for hostPort, which left at now.
func (d *departures[V]) put(hostPort string, v V, now time.Time) {
	d.prune(now)
	d.seq++
	d.m[hostPort] = departed[V]{v: v, at: now, seq: d.seq}
	d.q = append(d.q, departure{hostPort: hostPort, at: now, seq: d.seq})
	for len(d.m) > d.max {
		d.pop()
	}
}

// get returns what was recorded for hostPort if it left less than the
// grace before now.
func (d *departures[V]) get(hostPort string, now time.Time) (V, bool) {
	e, ok := d.m[hostPort]
	if !ok || now.Sub(e.at) >= d.grace {
		var zero V
		return zero, false
	}
	return e.v, true
}

// take is get, forgetting hostPort.
func (d *departures[V]) take(hostPort string, now time.Time) (V, bool) {
	v, ok := d.get(hostPort, now)
	delete(d.m, hostPort)
	d.prune(now)
	return v, ok
}

// len returns how many host:ports are remembered.
func (d *departures[V]) len() int { return len(d.m) }

// prune forgets the host:ports that left at least the grace before now.
func (d *departures[V]) prune(now time.Time) {
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
func (d *departures[V]) pop() {
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
