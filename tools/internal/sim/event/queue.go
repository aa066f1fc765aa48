// Package event is the discrete-event core the simulators share: a Queue
// that hands back events in the order they are due, ties in the order
// pushed (so runs replay exactly), and a Loop that runs scheduled
// functions on a clock.Fake.
package event

import "time"

// Queue holds events of type E, each due at a time, and hands them back in
// order of that time, ties in the order pushed. Its zero value is empty.
type Queue[E any] struct {
	items []item[E] // a binary min-heap by (at, seq)
	seq   uint64    // the number of pushes so far
}

type item[E any] struct {
	at  time.Time
	seq uint64
	e   E
}

func (a *item[E]) before(b *item[E]) bool {
	if c := a.at.Compare(b.at); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// Len returns the number of events in the queue.
func (q *Queue[E]) Len() int { return len(q.items) }

// Push adds e, due at at.
func (q *Queue[E]) Push(at time.Time, e E) {
	q.seq++
	q.items = append(q.items, item[E]{at: at, seq: q.seq, e: e})
	q.up(len(q.items) - 1)
}

// Next returns when the first event is due.
func (q *Queue[E]) Next() (at time.Time, ok bool) {
	if len(q.items) == 0 {
		return time.Time{}, false
	}
	return q.items[0].at, true
}

// Pop removes and returns the first event and when it is due.
func (q *Queue[E]) Pop() (at time.Time, e E, ok bool) {
	n := len(q.items) - 1
	if n < 0 {
		return time.Time{}, e, false
	}
	first := q.items[0]
	q.items[0] = q.items[n]
	q.items[n] = item[E]{} // drop the reference the event may hold
	q.items = q.items[:n]
	q.down(0)
	return first.at, first.e, true
}

func (q *Queue[E]) up(i int) {
	h := q.items
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *Queue[E]) down(i int) {
	h := q.items
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r].before(&h[c]) {
			c = r
		}
		if !h[c].before(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
