package server

// Expiry lists. A lease's expiry is the time of its last grant plus the
// lease length, and time only moves forward, so the leases of one lease
// length, kept in the order they were last granted, are in expiry order:
// a renewal moves its lease to the tail in O(1), and expired leases are at
// the head. A resource keeps one list per lease length among its leases:
// one, or a few for a lease length after a configuration change (a
// shorter lease's expiry would otherwise have to be placed in the middle
// of the list). An intermediate's leases cut at its own lease's expiry
// (see decide) share one more list, of length cutLength: that expiry
// does not go back as its lease is renewed, so they too are granted in
// expiry order (were it to go back, link would still place them right,
// walking back from the tail).

// cutLength is the length of the list of an intermediate's leases cut at
// its own lease's expiry.
const cutLength = -1

// expiryList is a doubly linked list of slots with the same lease length,
// in expiry order.
type expiryList struct {
	length     int32
	head, tail int32
}

// list returns the index of the list for lease length, or -1.
func (t *table) list(length int32) int {
	for k := range t.lists {
		if t.lists[k].length == length {
			return k
		}
	}
	return -1
}

// unlink takes slot i out of its expiry list, if it is in one.
func (t *table) unlink(i int32) {
	s := &t.slots[i]
	k := t.list(s.length)
	if k < 0 {
		return
	}
	l := &t.lists[k]
	if s.prev != 0 {
		t.slots[s.prev].next = s.next
	} else if l.head == i {
		l.head = s.next
	} else {
		return // not in the list
	}
	if s.next != 0 {
		t.slots[s.next].prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = 0, 0
	if l.head == 0 {
		t.lists[k] = t.lists[len(t.lists)-1]
		t.lists = t.lists[:len(t.lists)-1]
		if len(t.lists) == 0 {
			t.lists = nil
		}
	}
}

// link puts slot i (in no list) into the list of its lease length,
// expiring at expiry. That is the tail but when the clock went back.
func (t *table) link(i int32, expiry, length int64) {
	s := &t.slots[i]
	s.expiry, s.length = expiry, int32(length)
	k := t.list(s.length)
	if k < 0 {
		t.lists = append(t.lists, expiryList{length: s.length})
		k = len(t.lists) - 1
	}
	l := &t.lists[k]
	after := l.tail
	for after != 0 && t.slots[after].expiry > expiry {
		after = t.slots[after].prev
	}
	s.prev = after
	if after == 0 {
		s.next = l.head
		l.head = i
	} else {
		s.next = t.slots[after].next
		t.slots[after].next = i
	}
	if s.next != 0 {
		t.slots[s.next].prev = i
	} else {
		l.tail = i
	}
}

// earliest returns the slot that expires first, or 0 when there is none.
func (t *table) earliest() int32 {
	var best int32
	for _, l := range t.lists {
		if best == 0 || t.slots[l.head].expiry < t.slots[best].expiry {
			best = l.head
		}
	}
	return best
}

// latest returns the time the last lease expires (0 when there is none).
func (t *table) latest() int64 {
	var last int64
	for _, l := range t.lists {
		last = max(last, t.slots[l.tail].expiry)
	}
	return last
}
