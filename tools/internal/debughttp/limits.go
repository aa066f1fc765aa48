package debughttp

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// MaxConns is the most connections the listener holds: one accepted at
// the cap closes the one waiting longest between requests, or itself when
// all are in a request. A debug listener serves a few readers, and must
// not take the descriptors the command's own listener needs.
const MaxConns = 64

const (
	maxBodyBytes      = 1 << 20 // a request's body (/debug/pprof/symbol's)
	maxHeaderBytes    = 64 << 10
	maxProfileSeconds = 24 * 60 * 60
)

// limits are the listener's limits; tests use smaller ones.
type limits struct {
	maxConns          int
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration // a keep-alive connection's
	// requestTimeout bounds reading a body and writing an answer; a
	// profile or trace gets its "seconds" on top.
	requestTimeout time.Duration
}

var defaultLimits = limits{maxConns: MaxConns, readHeaderTimeout: 10 * time.Second,
	idleTimeout: 30 * time.Second, requestTimeout: 30 * time.Second}

// bounded wraps h so that each request has requestTimeout (plus the
// seconds a profile asks for) and maxBodyBytes of body. The deadlines are
// per request: a server-wide WriteTimeout would cut every profile short.
func bounded(h http.Handler, requestTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(requestTimeout + streamFor(r))
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline)
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		h.ServeHTTP(w, r)
	})
}

// streamFor is how long r's answer streams by design: the "seconds" of a
// profile, trace or delta profile (with their defaults), else 0.
func streamFor(r *http.Request) time.Duration {
	var sec int64
	switch r.URL.Path {
	case PprofPath + "profile":
		sec = 30
	case PprofPath + "trace":
		sec = 1
	}
	if n, err := strconv.ParseInt(r.URL.Query().Get("seconds"), 10, 64); err == nil && n > 0 {
		sec = n
	}
	return time.Duration(min(sec, maxProfileSeconds)) * time.Second
}

// capListener is a listener holding at most max connections (see
// MaxConns); the server's ConnState hook (track) tells it their states.
type capListener struct {
	net.Listener
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connState // accepted and not yet closed
}

type connState struct {
	state http.ConnState
	since time.Time // when it entered state
}

// Accept returns the next connection, once there is room for it.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim := l.waitingLongestLocked()
			if victim == nil {
				l.mu.Unlock()
				c.Close()
				continue
			}
			delete(l.conns, victim)
			victim.Close()
		}
		l.conns[c] = &connState{state: http.StateNew, since: time.Now()}
		l.mu.Unlock()
		return c, nil
	}
}

// waitingLongestLocked returns the connection that has been new or idle
// the longest, or nil.
func (l *capListener) waitingLongestLocked() net.Conn {
	var oldest net.Conn
	var since time.Time
	for c, s := range l.conns {
		if (s.state == http.StateNew || s.state == http.StateIdle) && (oldest == nil || s.since.Before(since)) {
			oldest, since = c, s.since
		}
	}
	return oldest
}

// track is the server's ConnState hook.
func (l *capListener) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	default:
		if s, ok := l.conns[c]; ok && s.state != state {
			s.state, s.since = state, time.Now()
		}
	}
}
