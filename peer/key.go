package peer

import (
	"time"

	"github.com/sluice-rpc/sluice/balance"
)

// ChooseKeyAt is ChooseAt for a call carrying a shard key: it picks the
// key's home on the list's consistent-hash ring (balance.Ring, each peer
// placed in proportion to its weight) and walks on along the ring, past
// peers in exclude (the ones this call used: its retries and hedges go to
// the next distinct peers), past peers in TransientFailure, ejected,
// throttled or resting after a pushback, and past peers that already have
// their bounded load in flight (balance.Capacity). While the key's home
// (the first peer not excluded) is connecting, it returns ErrConnecting,
// so that the call waits for it within its deadline rather than
// scattering the key. When every other peer is excluded or refuses, it
// takes the excluded ones in ring order, then the ones at capacity. It
// allocates nothing.
func (l *List) ChooseKeyAt(key string, exclude []*Peer, now time.Time) (*Peer, error) {
	m := l.peers.Load()
	peers := m.peers
	if len(peers) == 0 {
		return nil, l.noPeers()
	}
	ns := now.UnixNano()
	ejecting := l.ejecting(peers, ns)
	var inFlight int64
	for _, p := range peers {
		inFlight += max(p.pending.Load(), 0)
	}
	c := l.bal.Factor()
	h := balance.KeyHash(key)
	r := m.ringOf()
	var (
		avail  availability
		chosen *Peer
		home   = true
		wait   bool
	)
	// Pass 0: the ring order within capacity, peers not used by the call;
	// 1: the same ignoring capacity; 2: the call's own peers.
	for pass := 0; pass < 3 && chosen == nil && !wait; pass++ {
		r.Walk(h, func(i int) bool {
			p := peers[i]
			if contains(exclude, p) != (pass == 2) {
				return true
			}
			isHome := home
			home = false
			switch p.State() {
			case Ready:
				avail.anyReady = true
			case Idle, Connecting:
				avail.ready(p) // asks an Idle peer to connect
				if isHome && pass == 0 {
					wait = true
					return false
				}
				return true
			default:
				return true
			}
			if ejecting && p.ejectedAt(ns) {
				return true
			}
			if pass == 0 && p.pending.Load() >= balance.Capacity(c, inFlight, p.Weight(), m.total) {
				return true
			}
			chosen = l.take(p, now)
			return chosen == nil
		})
	}
	if chosen != nil {
		return chosen, nil
	}
	if wait {
		return nil, ErrConnecting
	}
	return nil, avail.err()
}

// Home returns key's home: the peer a call carrying key as its shard key
// goes to when that peer is ready and within its bounded load (nil for an
// empty list).
func (l *List) Home(key string) *Peer {
	m := l.peers.Load()
	if len(m.peers) == 0 {
		return nil
	}
	return m.peers[m.ringOf().Home(balance.KeyHash(key))]
}
