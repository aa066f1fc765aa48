package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// UnreadTotal is the attack on the server-wide bound of answers waiting
// to be written: connections that never read and connections that read a
// little now and then, each sending many calls.
const UnreadTotal Attack = "unread-total"

// unreadTotalParams are the numbers of "unread-total" at a size.
type unreadTotalParams struct {
	never, trickle int           // connections that never read, and that trickle
	calls, size    int           // echo calls each connection sends, and their arg3
	every          time.Duration // a trickling connection reads trickleBytes this often
	hold           time.Duration // how long the attack holds once in place
}

// trickleBytes is what a trickling connection reads at a time: 256 KB
// every 5 s kept each write of a server moving that judged stalls by one
// write, so that it never closed the connection.
const trickleBytes = 256 << 10

func unreadTotalFor(s Size) unreadTotalParams {
	if s == CI {
		return unreadTotalParams{never: 2, trickle: 2, calls: 300, size: 60 << 10, every: 3 * time.Second, hold: 4 * time.Second}
	}
	// The report's figures: 12 connections that never read held 1.34
	// GB, 20 trickling ones 2.44 GB for 60 s.
	return unreadTotalParams{never: 12, trickle: 20, calls: 1100, size: 60 << 10, every: 5 * time.Second, hold: 60 * time.Second}
}

// runUnreadTotal opens the never-reading and the trickling connections
// (two attacker children), has each send its echo calls while a side
// client calls at e.p.sideRate, holds, and leaves.
func runUnreadTotal(e *env) error {
	q := unreadTotalFor(e.cfg.Size)
	e.before()
	s := e.sample()
	stopSide := e.startSide()
	defer stopSide()
	start := time.Now()
	never, err := startAttacker(job{Kind: "unread", Target: e.t.Addr, Conns: q.never, Count: q.calls, Size: q.size})
	if err != nil {
		e.peaks(s)
		return err
	}
	defer never.stop()
	trickle, err := startAttacker(job{Kind: "unread", Target: e.t.Addr, Conns: q.trickle, Count: q.calls, Size: q.size, Over: q.every})
	if err != nil {
		e.peaks(s)
		return err
	}
	defer trickle.stop()
	for _, a := range []*attacker{never, trickle} {
		if _, err := a.next("ready", readyLimit, nil); err != nil {
			e.peaks(s)
			return err
		}
	}
	e.logf("%d + %d connections open in %.1fs", q.never, q.trickle, time.Since(start).Seconds())
	err = e.pause(q.hold)
	var dones [2]event
	for i, a := range []*attacker{never, trickle} {
		done, lerr := a.leave(leaveLimit)
		if lerr != nil {
			e.r.problem("an attacker leaving: %v", lerr)
		}
		dones[i] = done
	}
	e.r.Side = stopSide()
	e.peaks(s)
	if err == nil {
		err = e.pause(e.p.settle)
	}
	e.after()
	e.r.fig("calls written", "%d by %d connections that never read, %d by %d that read %d KB every %s (of %d each, %d KB)",
		dones[0].Sent, q.never, dones[1].Sent, q.trickle, trickleBytes>>10, sec(q.every), q.calls, q.size>>10)
	for i, what := range []string{"never-reading connections", "trickling connections"} {
		d := dones[i]
		n := []int{q.never, q.trickle}[i]
		if d.Closed > 0 {
			e.r.fig(what, "%d of %d closed by the server, the last %s after the attack started", d.Closed, n, sec(time.Unix(0, d.At).Sub(start)))
		} else {
			e.r.fig(what, "%d open until the attacker left (%s)", n, sec(q.hold))
		}
		if d.Note != "" {
			e.r.fig(what+": answers", "%s", d.Note)
		}
	}
	e.r.Conns = &Conns{Wanted: q.never + q.trickle, Opened: q.never + q.trickle, Closed: dones[0].Closed + dones[1].Closed}
	e.r.fig(fmt.Sprintf("side client (%g/s)", e.p.sideRate), "%s", e.r.Side)
	return err
}

// childUnreadMany is the attacker child of "unread-total" (an "unread"
// job with Conns > 1 or Over set): it opens j.Conns connections with a
// 64 KB receive buffer, and on each sends j.Count echo calls of j.Size
// bytes, as fast as the server takes them. With j.Over 0 it never reads;
// otherwise each connection reads trickleBytes every j.Over. It is ready
// once the connections are open, writes until told to leave, and then
// reports what it sent, what it read, and how many connections the
// server closed.
func childUnreadMany(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	conns := make([]*rawConn, 0, j.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range max(1, j.Conns) {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		rc, err := dialRawWith(dctx, net.Dialer{Control: smallReceiveBuffer(unreadBuffer)}, j.Target, "")
		cancel()
		if err != nil {
			return err
		}
		conns = append(conns, rc)
		if err := rc.handshake(handshakeTimeout); err != nil {
			return err
		}
	}
	out.emit(event{Ev: "ready", Opened: len(conns)})
	var (
		sent, wrote, read atomic.Int64
		closed            atomic.Int32
		lastClose         atomic.Int64
		wg                sync.WaitGroup
	)
	stop := make(chan struct{})
	gone := func() {
		closed.Add(1)
		lastClose.Store(time.Now().UnixNano())
	}
	arg3 := make([]byte, j.Size)
	for _, rc := range conns {
		var once sync.Once
		seen := func() { once.Do(gone) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range j.Count {
				spec := callSpec{id: uint32(2*i + 3), ttl: time.Minute, service: Service, scheme: "raw", method: MethodEcho, arg3: arg3}
				err := spec.frames(func(f []byte, _ bool) error {
					n, err := rc.Write(f)
					wrote.Add(int64(n))
					return err
				})
				if err != nil {
					return
				}
				sent.Add(1)
			}
		}()
		if j.Over > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				trickleRead(rc.Conn, j.Over, stop, &read, seen)
			}()
		}
		// The server's close shows on its socket at once; a trickling
		// reader would meet it only behind the answers the kernel holds.
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if c, err := serverClosed(rc.Conn); err == nil && c {
						seen()
						return
					}
				}
			}
		}()
	}
	<-leave
	close(stop)
	for _, c := range conns {
		c.Close() // ends the writers
	}
	wg.Wait()
	note := ""
	if j.Over > 0 {
		note = fmt.Sprintf("%s MiB read in all", mb(read.Load()))
	}
	out.emit(event{Ev: "done", Sent: sent.Load(), Bytes: wrote.Load(), Closed: int(closed.Load()), At: lastClose.Load(), Note: note})
	return nil
}

// trickleRead reads trickleBytes from c every every until stop, adding
// them to read, and calls gone when the server closed c.
func trickleRead(c net.Conn, every time.Duration, stop <-chan struct{}, read *atomic.Int64, gone func()) {
	buf := make([]byte, 64<<10)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		c.SetReadDeadline(time.Now().Add(every / 2))
		for left := trickleBytes; left > 0; {
			n, err := c.Read(buf[:min(left, len(buf))])
			read.Add(int64(n))
			left -= n
			var ne net.Error
			switch {
			case err == nil:
			case errors.As(err, &ne) && ne.Timeout():
				left = 0 // nothing more came for now
			case errors.Is(err, io.EOF) || !errors.Is(err, net.ErrClosed):
				gone() // the server closed it (EOF or reset)
				return
			default:
				return // closed here: the attacker leaves
			}
		}
	}
}
