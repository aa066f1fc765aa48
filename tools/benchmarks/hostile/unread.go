package hostile

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// runUnreadReplies writes e.p.unread echo calls of e.p.unreadSize bytes on
// one connection (with a 64 KB receive buffer) and never reads the
// replies, then holds for e.p.hold while a side client calls at
// e.p.sideRate, and leaves.
func runUnreadReplies(e *env) error {
	p := e.p
	e.before()
	s := e.sample()
	stopSide := e.startSide()
	defer stopSide()
	start := time.Now()
	a, err := startAttacker(job{Kind: "unread", Target: e.t.Addr, Count: p.unread, Size: p.unreadSize})
	if err != nil {
		e.peaks(s)
		return err
	}
	defer a.stop()
	ready, err := a.next("ready", readyLimit, nil)
	if err != nil {
		e.peaks(s)
		return err
	}
	e.logf("wrote %d calls in %.1fs", ready.Sent, time.Since(start).Seconds())
	err = e.pause(p.hold)
	done, lerr := a.leave(leaveLimit)
	if lerr != nil {
		e.r.problem("the attacker leaving: %v", lerr)
	}
	e.r.Side = stopSide()
	e.peaks(s)
	if err == nil {
		err = e.pause(p.settle)
	}
	e.after()
	e.r.fig("calls written, replies unread", "%d of %d (%s MiB)", ready.Sent, p.unread, mb(ready.Bytes))
	if ready.Note != "" {
		e.r.fig("attacker", "%s", ready.Note)
	}
	e.r.Conns = &Conns{Wanted: 1, Opened: 1, Closed: done.Closed}
	if done.Closed > 0 {
		at := time.Unix(0, done.At).Sub(start)
		e.r.Conns.First, e.r.Conns.Median, e.r.Conns.Last = millis.Duration(at), millis.Duration(at), millis.Duration(at)
		e.r.fig("attacker connection", "closed by the server %s after the attack started", sec(at))
	} else {
		e.r.fig("attacker connection", "open until the attacker left (%s)", sec(p.hold))
	}
	e.r.fig(fmt.Sprintf("side client (%g/s)", p.sideRate), "%s", e.r.Side)
	return err
}

// unreadBuffer is the receive buffer of the connection whose replies are
// never read: small, as an attacker would make it, so that the server's
// writes block after 64 KB whatever the kernel's autotuning allows.
const unreadBuffer = 64 << 10

// childUnread is the attacker child of "unread-replies": it writes j.Count
// echo calls of j.Size bytes on one connection and never reads its
// socket; it stops writing when a write blocks for writeLimit. Until told
// to leave, it watches the connection's TCP state on both ends (without
// reading) for the server closing it.
func childUnread(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	if j.Conns > 1 || j.Over > 0 {
		return childUnreadMany(ctx, j, out, leave) // unread-total's
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	rc, err := dialRawWith(dctx, net.Dialer{Control: smallReceiveBuffer(unreadBuffer)}, j.Target, "")
	cancel()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.handshake(handshakeTimeout); err != nil {
		return err
	}
	arg3 := make([]byte, j.Size)
	var sent, bytes int64
	note := ""
	for i := 0; i < j.Count; i++ {
		spec := callSpec{id: uint32(2*i + 3), ttl: time.Minute, service: Service, scheme: "raw", method: MethodEcho, arg3: arg3}
		err := spec.frames(func(f []byte, _ bool) error {
			rc.SetWriteDeadline(time.Now().Add(writeLimit))
			n, err := rc.Write(f)
			bytes += int64(n)
			return err
		})
		if err != nil {
			if isTimeout(err) {
				note = fmt.Sprintf("writes blocked for %v after %d calls: the server stopped reading", writeLimit, sent)
			} else {
				note = fmt.Sprintf("a write failed after %d calls: %v", sent, err)
			}
			break
		}
		sent++
	}
	out.emit(event{Ev: "ready", Sent: sent, Bytes: bytes, Note: note})
	var closedAt int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for closedAt == 0 {
		select {
		case <-leave:
			out.emit(event{Ev: "done", Sent: sent})
			return nil
		case <-tick.C:
			if closed, err := serverClosed(rc.Conn); err == nil && closed {
				closedAt = time.Now().UnixNano()
			}
		}
	}
	<-leave
	out.emit(event{Ev: "done", Sent: sent, Closed: 1, At: closedAt})
	return nil
}
