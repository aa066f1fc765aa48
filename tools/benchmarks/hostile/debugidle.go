package hostile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// runDebugIdle holds e.p.conns keep-alive connections to the server's
// debug listener (--debug-listen), each idle after one request, while a
// new client makes TChannel calls to the same process: the descriptors
// the debug listener holds are the TChannel listener's too.
func runDebugIdle(e *env) error {
	if e.t.DebugURL == "" {
		return errors.New("debug-idle attacks the server's debug listener: give its --debug-url")
	}
	u, err := url.Parse(e.t.DebugURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("debug-idle: the debug listener's URL %q names no host:port", e.t.DebugURL)
	}
	addr := u.Host
	p := e.p
	e.before()
	s := e.sample()
	start := time.Now()
	children := (p.conns + perChild - 1) / perChild
	var attackers []*attacker
	defer func() {
		for _, a := range attackers {
			a.stop()
		}
	}()
	c := &Conns{Wanted: p.conns}
	e.r.Conns = c
	for i := 0; i < children; i++ {
		share := p.conns / children
		if i < p.conns%children {
			share++
		}
		a, err := startAttacker(job{Kind: "http-idle", Target: addr, Conns: share, Workers: dialers})
		if err != nil {
			e.peaks(s)
			return err
		}
		attackers = append(attackers, a)
	}
	for _, a := range attackers {
		ev, err := a.next("ready", readyLimit, nil)
		if err != nil {
			e.peaks(s)
			return err
		}
		c.Opened += ev.Opened
		c.Early += ev.Closed
		c.Failed += ev.Failed
		if ev.Note != "" {
			e.r.fig("attacker", "%s", ev.Note)
		}
	}
	c.ReadyIn = millis.Duration(time.Since(start))
	e.logf("%s", c)

	return e.holdWhileProbed(attackers, start, s, "new TChannel client during the attack")
}

// childHTTPIdle is the attacker child of debug-idle: it opens j.Conns
// connections to the HTTP listener j.Target, makes one keep-alive
// request on each (GET /debug/pprof/cmdline) and reads the answer, then
// leaves it idle; it reports "ready" (Opened: the connections answered
// and left idle; Closed: those closed before their answer), each
// connection the server closes, and closes them all when told to leave.
func childHTTPIdle(ctx context.Context, j job, out *emitter, leave <-chan struct{}) error {
	var (
		mu       sync.Mutex
		conns    []net.Conn
		failed   int
		firstErr error
		leaving  atomic.Bool
		refused  atomic.Int64 // closed before its answer came
		closed   atomic.Int64 // closed by the server once idle
		readers  sync.WaitGroup
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		failed++
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	request := "GET /debug/pprof/cmdline HTTP/1.1\r\nHost: " + j.Target + "\r\n\r\n"
	for w := 0; w < max(1, j.Workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(j.Conns) {
				d := net.Dialer{Timeout: dialTimeout}
				c, err := d.DialContext(ctx, "tcp", j.Target)
				if err != nil {
					fail(err)
					continue
				}
				r := bufio.NewReader(c)
				_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
				_, err = io.WriteString(c, request)
				var res *http.Response
				if err == nil {
					res, err = http.ReadResponse(r, nil)
				}
				if err == nil {
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				if err != nil {
					// Refused or closed before it was idle: not held.
					refused.Add(1)
					out.emit(event{Ev: "closed"})
					c.Close()
					continue
				}
				_ = c.SetDeadline(time.Time{})
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				readers.Add(1)
				go func() {
					defer readers.Done()
					if _, err := r.ReadByte(); err != nil && !leaving.Load() {
						closed.Add(1)
						out.emit(event{Ev: "closed"})
					}
				}()
			}
		}()
	}
	wg.Wait()
	ready := event{Ev: "ready", Opened: len(conns), Failed: failed, Closed: int(refused.Load())}
	if firstErr != nil {
		ready.Note = fmt.Sprintf("first failed connect: %v", firstErr)
	}
	out.emit(ready)
	<-leave
	leaving.Store(true)
	for _, c := range conns {
		c.Close()
	}
	readers.Wait()
	out.emit(event{Ev: "done", Opened: len(conns), Closed: int(refused.Load() + closed.Load())})
	return nil
}
