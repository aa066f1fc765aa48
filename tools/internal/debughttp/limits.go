package debughttp

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The listener's limits: a debug listener serves a few readers, and must
// not take the descriptors the command's own listener needs.
const (
	// MaxConns is the most connections the listener holds: one accepted
	// at the cap closes the one waiting longest between requests, or
	// itself when all are in a request.
	MaxConns = 64
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout = 30 * time.Second
	// RequestTimeout bounds reading a body and writing an answer; a
	// profile or trace gets its "seconds" on top.
	RequestTimeout = 30 * time.Second
	// MaxBodyBytes bounds a request's body (/debug/pprof/symbol's).
	MaxBodyBytes      = 1 << 20
	maxProfileSeconds = 24 * 60 * 60
)

// limits are the listener's limits; tests use smaller ones.
type limits struct {
	maxConns          int
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	requestTimeout    time.Duration
}

var defaultLimits = limits{maxConns: MaxConns, readHeaderTimeout: ReadHeaderTimeout,
	idleTimeout: IdleTimeout, requestTimeout: RequestTimeout}

// bounded wraps h so that each request has requestTimeout (plus the
// seconds a profile asks for) and MaxBodyBytes of body. The deadlines are
// per request: a server-wide WriteTimeout would cut every profile short.
func bounded(h http.Handler, requestTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := requestTimeout + streamFor(r)
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(d)
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline)
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
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
	max int

	mu      sync.Mutex
	conns   map[net.Conn]*connState // accepted and not yet closed
	evicted int                     // connections closed to make room
	refused int                     // connections closed at once
}

type connState struct {
	state http.ConnState
	since time.Time // when it entered state
}

func newCapListener(l net.Listener, max int) *capListener {
	return &capListener{Listener: l, max: max, conns: map[net.Conn]*connState{}}
}

// Accept returns the next connection, once there is room for it.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim := l.waitingLongestLocked()
			if victim == nil {
				l.refused++
				l.mu.Unlock()
				c.Close()
				continue
			}
			delete(l.conns, victim)
			l.evicted++
			victim.Close()
		}
		l.conns[c] = &connState{state: http.StateNew, since: now}
		l.mu.Unlock()
		return c, nil
	}
}

// waitingLongestLocked returns the connection that has been new or idle
// the longest, or nil.
func (l *capListener) waitingLongestLocked() net.Conn {
	var (
		oldest net.Conn
		since  time.Time
	)
	for c, s := range l.conns {
		if s.state != http.StateNew && s.state != http.StateIdle {
			continue
		}
		if oldest == nil || s.since.Before(since) {
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

// held returns how many connections the listener holds.
func (l *capListener) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
