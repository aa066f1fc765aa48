package peerlist

import (
	"time"

	"github.com/sluice-rpc/sluice/internal/balancing"
	"github.com/sluice-rpc/sluice/peer"
)

// ejectedAt reports whether p is ejected at ns (Unix nanoseconds).
func (p *Peer) ejectedAt(ns int64) bool { return p.ejectedUntil.Load() > ns }

// eject ejects p at now, after its run of UNEXPECTED and NETWORK answers
// reached the threshold, unless ejection is disabled, p is already
// ejected, the list already has its most ejected peers, or the failure is
// shared (failingAlike); then p stays, and its next such answer tries
// again. The ejection lasts Ejection.Duration of its multiplier (see
// balancing.Ejection.Multiplier).
func (l *List) eject(p *Peer, now time.Time) {
	e := balancing.Ejection(l.bal.Ejection)
	if e.Disabled {
		return
	}
	ns := now.UnixNano()
	if ns < l.capFullUntil.Load() {
		// The list has its most ejected peers until then: a wide outage
		// must not take the lock and a pass over the peers per error.
		return
	}
	if ns < l.sharedUntil.Load() {
		return // nor one whose failure the peers shared a moment ago
	}
	if failingAlike(l.peers.Load().peers, p, ns) {
		l.sharedUntil.Store(ns + figuresTTL)
		return
	}
	l.ejectMu.Lock()
	defer l.ejectMu.Unlock()
	if p.ejectedAt(ns) {
		return
	}
	m := l.peers.Load()
	ejected, firstEnd := 0, int64(0)
	for _, q := range m.peers {
		if u := q.ejectedUntil.Load(); u > ns {
			ejected++
			if firstEnd == 0 || u < firstEnd {
				firstEnd = u
			}
		}
	}
	if ejected >= e.MaxEjected(len(m.peers)) {
		l.capFullUntil.Store(firstEnd)
		return
	}
	if !contains(m.peers, p) {
		return // removed since its call was sent
	}
	k := e.Multiplier(p.ejectK, time.Duration(ns-p.ejectEnd))
	until := ns + int64(e.Duration(k))
	p.ejectK, p.ejectEnd = k, until
	p.ejectedUntil.Store(until)
	p.errorsInRow.Store(0)
	p.lastAnswer.Store(answerNone) // back from the ejection, it has not answered yet
	p.ejections.Add(1)
	p.m.Ejections.Inc(1)
	// Choices see the ejection at once: the figures held expire, and a
	// pass that began before the ejection cannot put back its own (see
	// figuresAt), since this marker is new.
	m.figures.Store(&figures{})
}

// failingAlike reports whether the failure of p is one the peers share:
// among the other peers that are Ready and not ejected at ns, at least one
// has answered, and each whose last telling answer (see lastAnswer) is
// known ended with an UNEXPECTED or NETWORK error, as p's did. Their own
// downstream being down, say: ejecting p would only move its calls onto
// peers that fail alike, and leave the load uneven once they recover. A
// peer that has not answered yet tells nothing, nor one back from an
// ejection that has not answered since. An outlier is ejected as
// soon as one other peer answers as a working server does. It reads
// atomics only, and eject keeps its verdict a while (sharedUntil): under
// a wide outage every error calls eject.
func failingAlike(peers []*Peer, p *Peer, ns int64) bool {
	failing := 0
	for _, q := range peers {
		if q == p || q.ejectedAt(ns) || q.State() != peer.Ready {
			continue
		}
		switch q.lastAnswer.Load() {
		case answerWorking:
			return false
		case answerFailing:
			failing++
		}
	}
	return failing > 0
}

// A peer's last answer that says whether it works (Peer.lastAnswer): none
// yet, one a working server gives (OK, BUSY, BAD_REQUEST), or an
// UNEXPECTED or NETWORK error. Timeouts, cancellations and DECLINED say
// nothing either way.
const (
	answerNone int32 = iota
	answerWorking
	answerFailing
)

// Ejected reports whether the peer is ejected at now (from the list's
// clock): not chosen, after answering UNEXPECTED or NETWORK errors too
// many times in a row, until the time returned.
func (p *Peer) Ejected(now time.Time) (bool, time.Time) {
	if u := p.ejectedUntil.Load(); u > now.UnixNano() {
		return true, time.Unix(0, u)
	}
	return false, time.Time{}
}
