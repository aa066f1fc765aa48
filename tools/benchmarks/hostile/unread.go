package hostile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/tframe"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

const (
	writeLimit   = 5 * time.Second // one frame's write, past which the attacker gives up the connection
	unreadBuffer = 64 << 10        // the receive buffer of connections that do not read
	trickleBytes = 256 << 10       // a trickling read: enough to keep each of the server's writes moving
)

// errLastFragment stops a call's frames before its last one.
var errLastFragment = errors.New("the last fragment, never sent")

// runUnfinished sends e.p.unfinished requests without their last
// fragment, at a steady pace, beside the side client and, half-way, one
// large legitimate call; the attacker holds for e.p.unfinishedHold and
// leaves, and the "after" figures come e.p.unfinishedAfter later.
func runUnfinished(e *env) error {
	p := e.p
	e.startSide()
	a, _, err := e.attacker(job{Kind: "unfinished", Target: e.t.Addr, Conns: unfinishedTo, Count: p.unfinished,
		Size: p.unfinishedSize, Over: p.unfinishedOver, TTL: unfinishedTTL}, "", 0)
	if err != nil {
		return err
	}
	start := time.Now()
	legit := make(chan Call, 1)
	go func() {
		if e.pause(p.unfinishedOver/2) != nil {
			legit <- Call{}
			return
		}
		e.logf("the legitimate %d-byte call", p.legitSize)
		legit <- oneCall(e.ctx, e.t.Addr, make([]byte, p.legitSize), p.legitDeadline)
	}()
	ready, err := a.next("ready", p.unfinishedOver+readyLimit)
	l := <-legit // bounded by its deadline
	if err != nil {
		return err
	}
	e.logf("sent %d requests in %.1fs", ready.Sent, time.Since(start).Seconds())
	e.r.Legit = &l
	err = e.pause(p.unfinishedHold)
	done := e.leave(a)
	left := time.Now()
	e.logf("the attacker left; waiting %v for the after figures", p.unfinishedAfter)
	err = e.end(err, p.unfinishedAfter)
	e.r.fig("unfinished requests sent", "%d of %d (%s MiB) in %s; held until %s", ready.Sent, p.unfinished, mb(ready.Bytes),
		sec(time.Unix(0, ready.At).Sub(start)), sec(left.Sub(start)))
	e.r.fig("attacker connections closed by the server", "%d", done.Closed)
	e.r.note("the server sent the attacker", countList(done.Got))
	e.r.note("attacker", ready.Note)
	e.r.fig(fmt.Sprintf("legitimate %d MB call", p.legitSize/1_000_000), "%s", e.r.Legit)
	e.sideFigure()
	e.r.fig("after figures", "%s after the attacker left", sec(p.unfinishedAfter))
	return err
}

type unfinishedConn struct {
	rc         *rawConn
	dead, ours atomic.Bool // ours: closed by the attacker, not the server
}

// childUnfinished is the attacker child of "unfinished": j.Count requests
// of j.Size bytes over j.Over on j.Conns connections, each without its
// last fragment. A connection closed, or blocked for writeLimit, is
// replaced.
func childUnfinished(ctx context.Context, j job, out *emitter, leave context.Context) error {
	var (
		mu               sync.Mutex
		got              = map[string]int64{}
		closed           atomic.Int64
		leaving          atomic.Bool
		readers          sync.WaitGroup
		blocked, redials int
		sent, bytes      int64
		firstErr         error
	)
	open := func() (*unfinishedConn, error) {
		rc, err := dialHandshaken(ctx, j.Target, net.Dialer{})
		if err != nil {
			return nil, err
		}
		uc := &unfinishedConn{rc: rc}
		readers.Go(func() {
			for {
				h, f, err := rc.readFrame()
				if err != nil {
					if !leaving.Load() && !uc.ours.Load() {
						closed.Add(1)
					}
					uc.dead.Store(true)
					return
				}
				k := h.Type.String()
				if describe(h, f) != "" {
					k = "error " + codes.Code(f[tframe.HeaderSize]).String()
				}
				if h.Type == tframe.PingReq {
					rc.Write(tframe.Append(nil, tframe.PingRes, h.ID, nil))
				}
				mu.Lock()
				got[k]++
				mu.Unlock()
			}
		})
		return uc, nil
	}
	conns := make([]*unfinishedConn, max(1, j.Conns))
	ids := make([]uint32, len(conns))
	arg3 := make([]byte, j.Size)
	interval := j.Over / time.Duration(max(1, j.Count))
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
send:
	for i := range j.Count {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-leave.Done():
				break send
			}
		}
		k := i % len(conns)
		if conns[k] == nil || conns[k].dead.Load() {
			if conns[k] != nil {
				conns[k].rc.Close()
				redials++
			}
			uc, err := open()
			conns[k], ids[k], firstErr = uc, 1, cmp.Or(firstErr, err)
			if err != nil {
				continue
			}
		}
		uc := conns[k]
		ids[k] += 2
		var n int64
		err := echoCall(ids[k], j.TTL, arg3).frames(func(f []byte, more bool) error {
			if !more {
				return errLastFragment
			}
			uc.rc.SetWriteDeadline(time.Now().Add(writeLimit))
			w, err := uc.rc.Write(f)
			n += int64(w)
			return err
		})
		bytes += n
		switch {
		case errors.Is(err, errLastFragment):
			sent++
		case isTimeout(err):
			blocked++
			uc.ours.Store(true) // a frame half written: the connection is spent
			uc.dead.Store(true)
		default: // the server closed it; its reader counts that
			uc.dead.Store(true)
			firstErr = cmp.Or(firstErr, err)
		}
	}
	ready := event{Ev: "ready", Sent: sent, Bytes: bytes}
	ready.Note = fmt.Sprintf("%d connections replaced (%d after a write blocked for %v)", redials, blocked, writeLimit)
	if firstErr != nil {
		ready.Note += fmt.Sprintf("; first error: %v", firstErr)
	}
	out.emit(ready)
	<-leave.Done()
	leaving.Store(true)
	for _, uc := range conns {
		if uc != nil {
			uc.rc.Close()
		}
	}
	readers.Wait()
	mu.Lock()
	defer mu.Unlock()
	out.emit(event{Ev: "done", Sent: sent, Bytes: bytes, Closed: int(closed.Load()), Got: got})
	return nil
}

// runUnreadReplies writes e.p.unread echo calls on one connection and
// never reads the replies, then holds for e.p.hold beside the side client.
func runUnreadReplies(e *env) error {
	p := e.p
	e.startSide()
	start := time.Now()
	a, ready, err := e.attacker(job{Kind: "unread", Target: e.t.Addr, Conns: 1, Count: p.unread, Size: unreadSize, Deadline: writeLimit}, "ready", readyLimit)
	if err != nil {
		return err
	}
	e.logf("wrote %d calls in %.1fs", ready.Sent, time.Since(start).Seconds())
	err = e.pause(p.hold)
	done := e.leave(a)
	err = e.end(err, p.settle)
	e.r.fig("calls written, replies unread", "%d of %d (%s MiB)", ready.Sent, p.unread, mb(ready.Bytes))
	e.r.note("attacker", ready.Note)
	c := &Conns{Wanted: 1, Opened: 1, Closed: done.Closed}
	e.r.Conns = c
	if done.Closed > 0 {
		at := time.Unix(0, done.At).Sub(start)
		c.First, c.Median, c.Last = millis.Duration(at), millis.Duration(at), millis.Duration(at)
		e.r.fig("attacker connection", "closed by the server %s after the attack started", sec(at))
	} else {
		e.r.fig("attacker connection", "open until the attacker left (%s)", sec(p.hold))
	}
	e.sideFigure()
	return err
}

// runUnreadTotal has e.p.never connections that never read and
// e.p.trickle that trickle (two attacker children) send their echo calls
// beside the side client, holds, and leaves.
func runUnreadTotal(e *env) error {
	p := e.p
	e.startSide()
	start := time.Now()
	ns := []int{p.never, p.trickle}
	var attackers []*attacker
	for i, over := range []time.Duration{0, p.trickleEvery} {
		a, _, err := e.attacker(job{Kind: "unread", Target: e.t.Addr, Conns: ns[i], Count: p.totalCalls, Size: unreadSize, Over: over}, "", 0)
		if err != nil {
			return err
		}
		attackers = append(attackers, a)
	}
	for _, a := range attackers {
		if _, err := a.next("ready", readyLimit); err != nil {
			return err
		}
	}
	e.logf("%d + %d connections open in %.1fs", p.never, p.trickle, time.Since(start).Seconds())
	err := e.pause(p.totalHold)
	dones := []event{e.leave(attackers[0]), e.leave(attackers[1])}
	err = e.end(err, p.settle)
	e.r.fig("calls written", "%d by %d connections that never read, %d by %d that read %d KB every %s (of %d each, %d KB)",
		dones[0].Sent, p.never, dones[1].Sent, p.trickle, trickleBytes>>10, sec(p.trickleEvery), p.totalCalls, unreadSize>>10)
	for i, what := range []string{"never-reading connections", "trickling connections"} {
		if d := dones[i]; d.Closed > 0 {
			e.r.fig(what, "%d of %d closed by the server, the last %s after the attack started", d.Closed, ns[i], sec(time.Unix(0, d.At).Sub(start)))
		} else {
			e.r.fig(what, "%d open until the attacker left (%s)", ns[i], sec(p.totalHold))
		}
		e.r.note(what+": answers", dones[i].Note)
	}
	e.r.Conns = &Conns{Wanted: p.never + p.trickle, Opened: p.never + p.trickle, Closed: dones[0].Closed + dones[1].Closed}
	e.sideFigure()
	return err
}

// childUnread is the attacker child of "unread": on each of j.Conns
// connections with a small receive buffer it writes j.Count echo calls of
// j.Size bytes, never reading or, with j.Over, reading trickleBytes every
// j.Over. With j.Deadline a write blocked that long stops a connection,
// and the child is ready once all have stopped; without, once they are
// open. Until told to leave it watches for the server closing them.
func childUnread(ctx context.Context, j job, out *emitter, leave context.Context) error {
	var conns []*rawConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range max(1, j.Conns) {
		rc, err := dialHandshaken(ctx, j.Target, net.Dialer{Control: smallReceiveBuffer(unreadBuffer)})
		if err != nil {
			return err
		}
		conns = append(conns, rc)
	}
	var (
		sent, wrote, read, lastClose atomic.Int64
		closed                       atomic.Int32
		writers, watchers            sync.WaitGroup
		mu                           sync.Mutex
		notes                        []string
	)
	stop := make(chan struct{})
	arg3 := make([]byte, j.Size)
	for _, rc := range conns {
		var once sync.Once
		gone := func() {
			once.Do(func() {
				closed.Add(1)
				lastClose.Store(time.Now().UnixNano())
			})
		}
		writers.Go(func() {
			for i := range j.Count {
				err := echoCall(uint32(2*i+3), time.Minute, arg3).frames(func(f []byte, _ bool) error {
					if j.Deadline > 0 {
						rc.SetWriteDeadline(time.Now().Add(j.Deadline))
					}
					n, err := rc.Write(f)
					wrote.Add(int64(n))
					return err
				})
				if err != nil && j.Deadline > 0 {
					note := fmt.Sprintf("a write failed after %d calls: %v", sent.Load(), err)
					if isTimeout(err) {
						note = fmt.Sprintf("writes blocked for %v after %d calls: the server stopped reading", j.Deadline, sent.Load())
					}
					mu.Lock()
					notes = append(notes, note)
					mu.Unlock()
				}
				if err != nil {
					return
				}
				sent.Add(1)
			}
		})
		if j.Over > 0 {
			watchers.Go(func() { trickleRead(rc.Conn, j.Over, stop, &read, gone) })
		}
		// The server's close shows on its socket at once, not behind the
		// answers the kernel holds.
		watchers.Go(func() {
			every(100*time.Millisecond, stop, func() bool {
				c, err := serverClosed(rc.Conn)
				if err == nil && c {
					gone()
				}
				return !c
			})
		})
	}
	if j.Deadline > 0 {
		writers.Wait()
	}
	mu.Lock()
	out.emit(event{Ev: "ready", Opened: len(conns), Sent: sent.Load(), Bytes: wrote.Load(), Note: strings.Join(notes, "; ")})
	mu.Unlock()
	<-leave.Done()
	close(stop)
	for _, c := range conns {
		c.Close() // ends the writers
	}
	writers.Wait()
	watchers.Wait()
	note := ""
	if j.Over > 0 {
		note = fmt.Sprintf("%s MiB read in all", mb(read.Load()))
	}
	out.emit(event{Ev: "done", Sent: sent.Load(), Bytes: wrote.Load(), Closed: int(closed.Load()), At: lastClose.Load(), Note: note})
	return nil
}

// trickleRead reads trickleBytes from c every d until stop, adding them
// to read, and calls gone when the server closed c.
func trickleRead(c net.Conn, d time.Duration, stop <-chan struct{}, read *atomic.Int64, gone func()) {
	buf := make([]byte, 64<<10)
	every(d, stop, func() bool {
		c.SetReadDeadline(time.Now().Add(d / 2))
		for left := trickleBytes; left > 0; {
			n, err := c.Read(buf[:min(left, len(buf))])
			read.Add(int64(n))
			left -= n
			switch {
			case err == nil:
			case isTimeout(err):
				return true // nothing more came for now
			case errors.Is(err, io.EOF) || !errors.Is(err, net.ErrClosed):
				gone() // the server closed it (EOF or reset)
				return false
			default:
				return false // closed here: the attacker leaves
			}
		}
		return true
	})
}

func every(d time.Duration, stop <-chan struct{}, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
}

// runSoak has an attacker child make a steady legitimate load for
// e.p.soakFor while the server's memory is sampled every e.p.soakEvery.
func runSoak(e *env) error {
	p := e.p
	_, done, err := e.attacker(job{Kind: "soak", Target: e.t.Addr, Rate: p.soakRate, For: p.soakFor}, "done", p.soakFor+leaveLimit)
	if err != nil {
		return err
	}
	e.r.Side = done.Load
	if err := e.end(nil, p.settle); err != nil {
		return err
	}
	e.r.fig(fmt.Sprintf("load (%g/s for %s)", p.soakRate, sec(p.soakFor)), "%s", e.r.Side)
	var mbs []string
	for _, rss := range e.s.rssSeries {
		mbs = append(mbs, mb(rss))
	}
	e.r.fig(fmt.Sprintf("server RSS MiB every %s", sec(p.soakEvery)), "%s", strings.Join(mbs, " "))
	return nil
}

// childSoak is the soak's load, in a process of its own so as not to
// share the runner's processor time.
func childSoak(ctx context.Context, j job, out *emitter, leave context.Context) error {
	stop, cancel := context.WithTimeout(leave, j.For) // the calls in flight keep ctx
	defer cancel()
	l, err := runLoad(ctx, j.Target, j.Rate, 100, stop.Done())
	if err != nil {
		return err
	}
	out.emit(event{Ev: "done", Load: l})
	<-leave.Done()
	return nil
}
