package peerlist

import (
	"time"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/peer"
)

// ChooseKeyAt is ChooseAt for a call carrying a shard key: it picks the
// key's home on the list's consistent-hash ring (balancing.Ring, each peer
// placed in proportion to its weight) and walks on along the ring, past
// peers in exclude (the ones this call used: its retries and hedges go to
// the next distinct peers), past peers that are not Ready, ejected,
// throttled or resting after a pushback, and past peers that already have
// their bounded load in flight (balancing.Capacity). While the key's home
// (the first peer not excluded) is connecting for the first time, or
// again after a healthy close (a restarted server), it returns
// ErrConnecting, so that the call waits for it within its deadline rather
// than scattering the key; a home reconnecting after a failure is passed
// over, as one in TransientFailure is. When every other peer is excluded
// or refuses, it takes the peers passed over for their load, then the
// excluded ones, in ring order. Each peer's limiter is asked at most once.
// It allocates nothing for lists of up to 512 peers, and costs a pass
// over the peers (their calls in flight).
func (l *List) ChooseKeyAt(key string, exclude []*Peer, now time.Time) (*Peer, error) {
	return l.ChooseKeyClassAt(key, exclude, now, criticality.Critical)
}

// ChooseKeyClassAt is ChooseKeyAt for a call of criticality class c (see
// ChooseClassAt).
func (l *List) ChooseKeyClassAt(key string, exclude []*Peer, now time.Time, cls criticality.Class) (*Peer, error) {
	return l.chooseKey(key, exclude, now, cls, false)
}

// ClaimKeyClassAt is ChooseKeyClassAt for a call about to be sent: the
// peer it returns counts the call as pending (Peer.Claim), and the peer's
// bounded load is checked and the call counted in one atomic step, so
// that calls choosing at the same moment cannot together take a peer past
// its bound, as they could if each checked first and counted when its
// attempt began. Hand the claim on with Peer.Sent once the call goes out,
// or give it back with Peer.Unclaim.
func (l *List) ClaimKeyClassAt(key string, exclude []*Peer, now time.Time, cls criticality.Class) (*Peer, error) {
	return l.chooseKey(key, exclude, now, cls, true)
}

// chooseKey is ChooseKeyClassAt, claiming the peer it returns if claim.
func (l *List) chooseKey(key string, exclude []*Peer, now time.Time, cls criticality.Class, claim bool) (*Peer, error) {
	m := l.peers.Load()
	if len(m.peers) == 0 {
		var err error
		if m, err = l.noPeers(); err != nil {
			return nil, err
		}
	}
	peers := m.peers
	r := m.ringOf()
	if r == nil { // too many peers for a ring
		p, err := l.ChooseClassAt(exclude, now, cls)
		if claim && err == nil {
			p.Claim()
		}
		return p, err
	}
	ns := now.UnixNano()
	ejecting := l.figuresAt(m, ns).ejecting
	var inFlight int64
	for _, p := range peers {
		inFlight += max(p.pending.Load(), 0)
	}
	c := balancing.Factor(l.bal)
	h := balancing.KeyHash(key)
	// loaded marks the peers pass 0 passed over for their load, the only
	// ones pass 1 looks at again.
	var small [8]uint64
	loaded := small[:]
	if len(peers) > 64*len(small) {
		loaded = make([]uint64, (len(peers)+63)/64)
	}
	var (
		avail  availability
		chosen *Peer
		home   = true
		wait   bool
	)
	// Pass 0: the ring order within the bounded load, peers not used by
	// the call; 1: those passed over for their load; 2: the call's own
	// peers.
	for pass := 0; pass < 3 && chosen == nil && !wait; pass++ {
		r.Walk(h, func(i int) bool {
			p := peers[i]
			if contains(exclude, p) != (pass == 2) || (pass == 1 && loaded[i/64]&(1<<(i%64)) == 0) {
				return true
			}
			isHome := home
			home = false
			switch p.State() {
			case peer.Ready:
				avail.anyReady = true
			case peer.Idle, peer.Connecting:
				avail.ready(p) // asks an Idle peer to connect
				if isHome && pass == 0 && !p.failedSinceReady() {
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
			var held int64 // 1 once pass 0 has claimed p
			if pass == 0 {
				limit := balancing.Capacity(c, inFlight, p.Weight(), m.total)
				within := false
				if claim {
					if within = p.claimBelow(limit); within {
						held = 1
					}
				} else {
					within = p.pending.Load() < limit
				}
				if !within {
					loaded[i/64] |= 1 << (i % 64)
					return true
				}
			}
			if chosen = l.take(p, now, cls, &avail, held); chosen == nil {
				if held == 1 {
					p.Unclaim()
				}
				return true
			}
			if claim && held == 0 {
				p.Claim()
			}
			return false
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

// failedSinceReady reports whether p's connection failed after it was
// last Ready (or, never Ready, failed at all): a peer connecting again
// after a failure may well fail again.
func (p *Peer) failedSinceReady() bool {
	f := p.LastFailure()
	return f != nil && f.At.UnixNano() >= p.readyAt()
}

// Home returns key's home: the peer a call carrying key as its shard key
// goes to when that peer is ready and within its bounded load (nil for an
// empty list, or one of more peers than a ring holds).
func (l *List) Home(key string) *Peer {
	m := l.peers.Load()
	if len(m.peers) == 0 {
		return nil
	}
	r := m.ringOf()
	if r == nil {
		return nil
	}
	return m.peers[r.Home(balancing.KeyHash(key))]
}
