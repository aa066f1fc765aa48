package debughttp

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The listener's limits. A debug listener serves a few readers (a
// Prometheus scraper, someone taking a profile), so its limits are
// small: whoever can reach it can never hold more than MaxConns of the
// process's descriptors, which the command's own listener (TChannel,
// Doorman's gRPC) needs.
const (
	// MaxConns is the most connections the listener holds. A connection
	// accepted at the cap makes room by closing the one that has waited
	// longest between requests (idle, or not yet sending a request); when
	// every connection is in the middle of a request, the new one is
	// closed at once.
	MaxConns = 64
	// ReadHeaderTimeout bounds the wait for a request's headers, from the
	// connection's opening or the previous answer.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection that sends no new
	// request for this long.
	IdleTimeout = 30 * time.Second
	// RequestTimeout bounds reading a request's body and writing its
	// answer, from the moment its headers are read. A profile or trace
	// that takes "seconds" (/debug/pprof/profile, 30 s by default;
	// /debug/pprof/trace, 1 s) gets those seconds on top.
	RequestTimeout = 30 * time.Second
	// MaxBodyBytes is the most a request's body may hold (1 MiB): only
	// /debug/pprof/symbol reads one, a list of addresses.
	MaxBodyBytes = 1 << 20
	// maxProfileSeconds clamps a profile's "seconds" when timing it.
	maxProfileSeconds = 24 * 60 * 60
)

// limits are the listener's limits; Serve uses the package's constants,
// tests smaller ones.
type limits struct {
	maxConns          int
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	requestTimeout    time.Duration
}

var defaultLimits = limits{maxConns: MaxConns, readHeaderTimeout: ReadHeaderTimeout,
	idleTimeout: IdleTimeout, requestTimeout: RequestTimeout}

// bounded wraps h so that each request has requestTimeout to send its
// body and read its answer (plus the seconds a profile or trace asks
// for), and at most MaxBodyBytes of body. The deadlines are set on the
// connection per request: a server-wide WriteTimeout would cut every
// profile short (net/http/pprof refuses one longer than it), and a
// server-wide ReadTimeout cancels a request whose handler is still
// running.
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
// CPU profile or an execution trace (their defaults when absent), or of
// any profile asked for as a delta (/debug/pprof/heap?seconds=10);
// otherwise 0.
func streamFor(r *http.Request) time.Duration {
	q := r.URL.Query().Get("seconds")
	var sec int64
	switch r.URL.Path {
	case PprofPath + "profile":
		sec = 30
	case PprofPath + "trace":
		sec = 1
	}
	if q != "" {
		if n, err := strconv.ParseInt(q, 10, 64); err == nil && n > 0 {
			sec = n
		}
	}
	return time.Duration(min(sec, maxProfileSeconds)) * time.Second
}

// capListener is a listener holding at most max connections: one
// accepted at the cap closes the longest-waiting connection that is
// between requests, or itself when there is none. The server's ConnState
// hook (track) tells it each connection's state.
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
			// Its serving goroutine sees the close, and reports it
			// closed (track then finds nothing to remove).
			victim.Close()
		}
		l.conns[c] = &connState{state: http.StateNew, since: now}
		l.mu.Unlock()
		return c, nil
	}
}

// waitingLongestLocked returns the connection that has been between
// requests (new or idle) the longest, or nil if every one is in a
// request.
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

// track is the server's ConnState hook. net/http calls it for a
// connection's StateNew before accepting the next one, so a connection
// is in conns before any state of it arrives.
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
