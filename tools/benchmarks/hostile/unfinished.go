package hostile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/internal/tframe"
)

// writeLimit bounds one frame's write: a server that stops reading makes
// the attacker give up that connection.
const writeLimit = 5 * time.Second

// errLastFragment stops a call's frames before its last one.
var errLastFragment = errors.New("the last fragment, never sent")

// runUnfinished sends e.p.unfinished requests of e.p.unfinishedSize bytes
// at a steady pace over e.p.unfinishedTo connections, each without its last
// fragment, while a side client calls at e.p.sideRate and, half-way, a
// legitimate client makes one large call; the attacker then holds for
// e.p.unfinishedHold and leaves, and the "after" figures are read
// e.p.unfinishedAfter later.
func runUnfinished(e *env) error {
	p := e.p
	e.before()
	s := e.sample()
	stopSide := e.startSide()
	a, err := startAttacker(job{Kind: "unfinished", Target: e.t.Addr, Conns: p.unfinishedTo, Count: p.unfinished,
		Size: p.unfinishedSize, Over: p.unfinishedOver, TTL: p.unfinishedTTL})
	if err != nil {
		stopSide()
		e.peaks(s)
		return err
	}
	defer a.stop()
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
	ready, err := a.next("ready", p.unfinishedOver+readyLimit, nil)
	if err != nil {
		stopSide()
		<-legit
		e.peaks(s)
		return err
	}
	e.logf("sent %d requests in %.1fs", ready.Sent, time.Since(start).Seconds())
	l := <-legit // bounded by its deadline
	e.r.Legit = &l
	err = e.pause(p.unfinishedHold)
	done, lerr := a.leave(leaveLimit)
	if lerr != nil {
		e.r.problem("the attacker leaving: %v", lerr)
	}
	left := time.Now()
	e.r.Side = stopSide()
	e.peaks(s)
	e.logf("the attacker left; waiting %v for the after figures", p.unfinishedAfter)
	if err == nil {
		err = e.pause(p.unfinishedAfter)
	}
	e.after()
	e.r.fig("unfinished requests sent", "%d of %d (%s MiB) in %s; held until %s", ready.Sent, p.unfinished, mb(ready.Bytes),
		sec(time.Unix(0, ready.At).Sub(start)), sec(left.Sub(start)))
	e.r.fig("attacker connections closed by the server", "%d", done.Closed)
	if len(done.Got) > 0 {
		e.r.fig("the server sent the attacker", "%s", countList(done.Got))
	}
	if ready.Note != "" {
		e.r.fig("attacker", "%s", ready.Note)
	}
	e.r.fig(fmt.Sprintf("legitimate %d MB call", p.legitSize/1_000_000), "%s", e.r.Legit)
	e.r.fig(fmt.Sprintf("side client (%g/s)", p.sideRate), "%s", e.r.Side)
	e.r.fig("after figures", "%s after the attacker left", sec(p.unfinishedAfter))
	return err
}

// unfinishedConn is one of the attacker's connections: frames the server
// sends it are counted, and its closing noticed.
type unfinishedConn struct {
	rc *rawConn
	// dead: no longer usable; ours: closed by the attacker, not the
	// server.
	dead, ours atomic.Bool
}

// childUnfinished is the attacker child of "unfinished": j.Count requests
// of j.Size bytes at a steady pace over j.Over on j.Conns connections,
// each request all its fragments but the last. A connection the server
// closes, or whose writes block for writeLimit, is replaced.
func childUnfinished(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	var (
		mu       sync.Mutex
		got      = map[string]int64{}
		closed   atomic.Int64
		leaving  atomic.Bool
		readers  sync.WaitGroup
		blocked  int
		redials  int
		sent     int64
		bytes    int64
		firstErr error
	)
	open := func() (*unfinishedConn, error) {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		rc, err := dialRaw(dctx, j.Target, "")
		if err != nil {
			return nil, err
		}
		if err := rc.handshake(handshakeTimeout); err != nil {
			rc.Close()
			return nil, err
		}
		uc := &unfinishedConn{rc: rc}
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				h, p, err := rc.readFrame()
				if err != nil {
					if !leaving.Load() && !uc.ours.Load() {
						closed.Add(1)
					}
					uc.dead.Store(true)
					return
				}
				k := h.Type.String()
				if d := describe(h, p); d != "" {
					k = "error " + errorCodeName(p[0])
				}
				if h.Type == tframe.PingReq {
					rc.Write(tframe.Append(nil, tframe.PingRes, h.ID, nil))
				}
				mu.Lock()
				got[k]++
				mu.Unlock()
			}
		}()
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
	for i := 0; i < j.Count; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-leave:
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
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				conns[k] = nil
				continue
			}
			conns[k], ids[k] = uc, 1
		}
		uc := conns[k]
		ids[k] += 2
		spec := callSpec{id: ids[k], ttl: j.TTL, service: Service, scheme: "raw", method: MethodEcho, arg3: arg3}
		var n int64
		err := spec.frames(func(f []byte, more bool) error {
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
			// A frame half written: the connection is spent.
			uc.ours.Store(true)
			uc.dead.Store(true)
		default: // the server closed it; its reader counts that
			uc.dead.Store(true)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	ready := event{Ev: "ready", Sent: sent, Bytes: bytes}
	ready.Note = fmt.Sprintf("%d connections replaced (%d after a write blocked for %v)", redials, blocked, writeLimit)
	if firstErr != nil {
		ready.Note += fmt.Sprintf("; first error: %v", firstErr)
	}
	out.emit(ready)
	<-leave
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
