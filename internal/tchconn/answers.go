package tchconn

import (
	"fmt"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// Answers owed. A call a peer sends is owed an answer from its first frame
// until the last frame of its answer goes to the socket: meanwhile its
// request and its answer are somewhere in the process (in a handler,
// waiting in tchannel-go's send queue, or in the write that is blocked on
// a peer that does not read). A Guard charges each such call the frame
// bytes of its request plus answerFrame, and bounds the total over all its
// connections (Limits.MaxAnswerBytes): a call over it is answered BUSY
// before tchannel-go sees it, so no handler runs and nothing more queues.
//
// A call that ends without an answer (cancelled, timed out, released
// without one) would stay charged: once its time to live has passed, or
// the peer cancelled it, its handler can queue nothing more, and once the
// connection's writer has since been idle for a whole sweep, nothing of
// it is left queued either, so the sweep releases it.

// answerFrame is what each call is charged for its answer beyond its
// request's bytes: tchannel-go builds every frame it sends in a buffer of
// the largest frame's size, whatever the answer's.
const answerFrame = 64 << 10

// maxOwedAge bounds the time to live the sweep waits for before it takes
// a call's missing answer for one that will not come: a request may claim
// 49 days.
const maxOwedAge = time.Minute

// answersKept is the most entries a Conn's map of answers owed may have
// held for the map to be kept once empty (see unowe).
const answersKept = 64

// owed is a call whose answer is not yet written.
type owed struct {
	bytes int64 // charged
	until int64 // the Guard's time after which its handler queues nothing more
}

// The locks: a Conn's amu guards its answers; g.mu may be taken with an
// amu held (to find a connection to close), never the other way round.
// The Guard's total and its count of connections owed answers are atomic,
// so that a call within the bound takes no lock but its connection's.

// owe charges the call whose first frame f is to c, or refuses it: the
// peer then gets BUSY, and it reports false. A request reusing the id of a
// call still owed passes uncharged: tchannel-go answers it with a protocol
// error.
func (c *Conn) owe(fr tframe.Frame, f []byte) bool {
	g := c.g
	if g.lim.MaxAnswerBytes <= 0 {
		return true
	}
	cost := int64(len(f)) + answerFrame
	c.amu.Lock()
	if c.unowed {
		c.amu.Unlock()
		return false // closed, or closing for the answers it owes: nothing more is served
	}
	if _, ok := c.answers[fr.ID]; ok {
		c.amu.Unlock()
		return true
	}
	victim, err := g.admitAnswer(c, cost)
	if err != nil {
		c.amu.Unlock()
		g.report(Event{Kind: AnswersRefused, Peer: c.peer, Inbound: c.inbound, ID: fr.ID, Err: err})
		c.sendError(fr.ID, errCodeBusy, err.Error())
		return false
	}
	if c.answers == nil {
		c.answers = map[uint32]owed{}
	}
	ttl := min(time.Duration(fr.TTL)*time.Millisecond, maxOwedAge)
	c.answers[fr.ID] = owed{bytes: cost, until: g.now.Load() + int64(ttl)}
	c.answersBig = c.answersBig || len(c.answers) > answersKept
	c.nowed.Store(int32(len(c.answers)))
	c.amu.Unlock()
	if victim != nil {
		victim.amu.Lock()
		victim.dropAnswers()
		victim.amu.Unlock()
		g.report(Event{Kind: AnswersUnread, Peer: victim.peer, Inbound: victim.inbound,
			Err: fmt.Errorf("closed: the connection was owed the most answers not yet written, over its share of the limit %d, when another needed room", g.lim.MaxAnswerBytes)})
		victim.Conn.Close()
	}
	return true
}

// admitAnswer charges n bytes of a call to c and the Guard, or returns why
// they are over the bound. Past MaxAnswerBytes, a connection whose writer
// waits on its peer (a write in progress) and holds its share (the bound
// over the connections owed answers) is refused. Others, under their
// share or reading as answers come, are admitted up to an eighth over the
// bound; beyond that, the connection owed the most among those whose
// writer waits and that hold more than their share is closed to make
// room: it is returned, to release and close once c.amu is released. So
// peers that do not read fill the bound and are refused there, or closed,
// while one that reads its answers goes on being served, however many of
// its calls its handlers hold. Concurrent admissions may pass the bound
// by a call each. Call it with c.amu held.
func (g *Guard) admitAnswer(c *Conn, n int64) (victim *Conn, err error) {
	max := g.lim.MaxAnswerBytes
	if total := g.owed.Load(); total+n > max {
		holders := int64(g.holders.Load())
		if c.owedBytes == 0 {
			holders++
		}
		share := max / holders
		if c.waitsOnPeer() && c.owedBytes+n > share {
			return nil, fmt.Errorf("server busy: %d bytes of answers are waiting to be written, the limit is %d, and this connection holds its share (%d); read the answers, or retry later", total, max, share)
		}
		if total+n > max+max/8 {
			if victim = g.makeRoom(c, share); victim == nil {
				return nil, fmt.Errorf("server busy: %d bytes of answers are waiting to be written, over the limit of %d; retry later", total, max)
			}
		}
	}
	g.chargeAnswer(c, n)
	return victim, nil
}

// makeRoom picks the connection to close to make room for c: owed the
// most among those whose writer waits and that hold more than share, and
// not picked before. It returns nil if there is none.
func (g *Guard) makeRoom(c *Conn, share int64) *Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	var victim *Conn
	var most int64
	for h := range g.conns {
		if o := h.owedNow.Load(); h != c && o > share && o > most && h.waitsOnPeer() && !h.closing.Load() {
			victim, most = h, o
		}
	}
	if victim != nil {
		victim.closing.Store(true)
	}
	return victim
}

// waitsOnPeer reports whether a write to c's peer is in progress: what is
// owed to it waits on its reading.
func (c *Conn) waitsOnPeer() bool { return c.wgen.Load()%2 == 1 }

// dropAnswers releases what c is owed and charges it nothing more: it is
// closed or to be closed. Call it with c.amu held.
func (c *Conn) dropAnswers() {
	c.g.chargeAnswer(c, -c.owedBytes)
	c.answers, c.answersBig = nil, false
	c.nowed.Store(0)
	c.unowed = true
}

// chargeAnswer adds n bytes (negative: releases) to what c and the Guard
// are owed. Call it with c.amu held.
func (g *Guard) chargeAnswer(c *Conn, n int64) {
	if n == 0 {
		return
	}
	old := c.owedBytes
	c.owedBytes += n
	c.owedNow.Store(c.owedBytes)
	g.owed.Add(n)
	switch {
	case old == 0 && c.owedBytes > 0:
		g.holders.Add(1)
	case old > 0 && c.owedBytes == 0:
		g.holders.Add(-1)
	}
}

// oweMore charges a later fragment of call id's request to it, if it is
// owed.
func (c *Conn) oweMore(id uint32, n int) {
	if c.nowed.Load() == 0 {
		return
	}
	c.amu.Lock()
	if o, ok := c.answers[id]; ok {
		o.bytes += int64(n)
		c.answers[id] = o
		c.g.chargeAnswer(c, int64(n))
	}
	c.amu.Unlock()
}

// answered releases call id: its answer's last frame is being written, or
// it was refused or dropped with an answer of the Conn's own.
func (c *Conn) answered(id uint32) {
	if c.nowed.Load() == 0 {
		return
	}
	c.amu.Lock()
	if o, ok := c.answers[id]; ok {
		c.unowe(id, o)
	}
	c.amu.Unlock()
}

// cancelled notes that the peer cancelled call id: its handler queues
// nothing from now on.
func (c *Conn) cancelled(id uint32) {
	if c.nowed.Load() == 0 {
		return
	}
	c.amu.Lock()
	if o, ok := c.answers[id]; ok {
		o.until = min(o.until, c.g.now.Load())
		c.answers[id] = o
	}
	c.amu.Unlock()
}

// unowe forgets call id, owed o. Call it with c.amu held. An empty map
// is kept for the next call (a connection's calls one at a time would
// make a new one each) unless it grew past answersKept entries: a map
// does not shrink, and a connection that once owed 1,024 answers would
// keep their room for its life.
func (c *Conn) unowe(id uint32, o owed) {
	c.g.chargeAnswer(c, -o.bytes)
	delete(c.answers, id)
	if len(c.answers) == 0 && c.answersBig {
		c.answers, c.answersBig = nil, false
	}
	c.nowed.Store(int32(len(c.answers)))
}

// sweepAnswers releases c's calls that will not be answered: those whose
// handler can queue nothing more since before the writer's last idle
// sweep interval (see the comment at the top). The sweep calls it, with
// no lock held.
func (c *Conn) sweepAnswers(now int64) {
	c.amu.Lock()
	defer c.amu.Unlock()
	gen := c.wgen.Load()
	idle := gen%2 == 0 && gen == c.idleGen && c.idleAt > 0
	from := c.idleAt
	c.idleGen, c.idleAt = gen, now
	if !idle {
		return
	}
	for id, o := range c.answers {
		if o.until <= from {
			c.unowe(id, o)
		}
	}
}

// forgetAnswers releases what c is owed when it closes.
func (c *Conn) forgetAnswers() {
	c.amu.Lock()
	c.dropAnswers()
	c.amu.Unlock()
}

// Owed returns the bytes charged for calls whose answers are not yet
// written, over all the Guard's connections.
func (g *Guard) Owed() int64 { return g.owed.Load() }

// writtenFrame notes the header of a frame tchannel-go writes, and, when
// known, its first payload byte (the flags of call frames): the last frame
// of an answer releases its call.
func (c *Conn) writtenFrame(h tframe.Header, flags byte, known bool) {
	switch h.Type {
	case tframe.Error:
		c.answered(h.ID)
	case tframe.CallRes, tframe.CallResContinue:
		if known && flags&tframe.MoreFragments == 0 {
			c.answered(h.ID)
		}
	}
}
