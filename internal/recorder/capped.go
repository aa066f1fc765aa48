package recorder

import (
	"maps"
	"sync"
	"sync/atomic"
)

// capped holds series keyed by names that come from outside (peers'
// addresses, callers' names), and bounds them: the first max keys asked
// for get series of their own and keep them for the life of the set, as
// tally keeps every series it made; any later key shares the series of an
// overflow key that the caller names (stats.PeerOther's,
// stats.CallerOther's).
//
// Lookups read a map that is copied on each insertion (at most max plus
// the overflow keys, each once) and then published whole: a key that has
// a series, or any key once the set is full, is found without a lock or an
// allocation. The zero capped is empty; set max before the first get.
type capped[K comparable, V any] struct {
	max  int
	m    atomic.Pointer[map[K]V]
	full atomic.Bool // own == max: a key not in m gets its overflow's series

	mu  sync.Mutex // held to insert
	own int        // keys with series of their own
}

// lookup returns k's series, or other's when k has none and the set is
// full, if that series is made; ok is false when get must make one.
func (c *capped[K, V]) lookup(k, other K) (v V, ok bool) {
	m := c.m.Load()
	if m == nil {
		return v, false
	}
	if v, ok = (*m)[k]; ok || !c.full.Load() {
		return v, ok
	}
	v, ok = (*m)[other]
	return v, ok
}

// get returns k's series, made by mk(k) on first use while fewer than max
// keys have their own; past that, the series of other, made by mk(other)
// on first use.
func (c *capped[K, V]) get(k, other K, mk func(K) V) V {
	if v, ok := c.lookup(k, other); ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var m map[K]V
	if p := c.m.Load(); p != nil {
		m = *p
	}
	if v, ok := m[k]; ok {
		return v
	}
	if c.own >= c.max {
		k = other
		if v, ok := m[k]; ok {
			return v
		}
	} else {
		c.own++
	}
	v := mk(k)
	next := maps.Clone(m)
	if next == nil {
		next = map[K]V{}
	}
	next[k] = v
	c.m.Store(&next)
	c.full.Store(c.own >= c.max)
	return v
}
