// Package debughttp serves a command's debug endpoints on one HTTP
// listener: /metrics (a tally scope through Prometheus; tally's dots
// become underscores), /debug/pprof/ and the command's own pages, with an
// index at /. Nothing is global: each Metrics has its own registry and the
// pprof handlers go on the listener's own mux.
//
// The listener is bounded like any server facing peers: at most MaxConns
// connections (a new one at the cap evicts the one waiting longest
// between requests), idle connections closed after 30 s, and each request
// given 30 s plus the seconds a profile asks for.
package debughttp

import (
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"

	"github.com/sluice-rpc/sluice/prometheus"
)

// Metrics is a tally root scope exposed by a Prometheus registry of its
// own, with the Go runtime's and the process's collectors.
type Metrics = prometheus.Metrics

// NewMetrics returns a Metrics. A metric the registry refuses is reported
// once on errorLog, if not nil, and left out of /metrics.
func NewMetrics(errorLog io.Writer) *Metrics {
	m, err := prometheus.New(prometheus.Options{ErrorLog: errorLog})
	if err != nil { // the options above are valid: a bug
		panic(err)
	}
	return m
}

// Paths Serve always mounts (MetricsPath only with a Metrics).
const (
	MetricsPath = "/metrics"
	PprofPath   = "/debug/pprof/"
)

// Server is a running debug listener.
type Server struct {
	srv  *http.Server
	lis  *capListener
	done chan error
}

// Serve listens on addr and serves, until Close: m's metrics at /metrics
// (if m is not nil), the runtime's profiles at /debug/pprof/, each of
// pages at its path (a subtree if it ends in "/"), and an index at /.
func Serve(addr string, m *Metrics, pages map[string]http.Handler) (*Server, error) {
	return serveLimited(addr, m, pages, defaultLimits)
}

func serveLimited(addr string, m *Metrics, pages map[string]http.Handler, lim limits) (*Server, error) {
	paths := []string{PprofPath}
	mux := http.NewServeMux()
	// net/http/pprof's handlers, on this mux rather than the default one.
	for name, h := range map[string]http.HandlerFunc{"": pprof.Index, "cmdline": pprof.Cmdline, "profile": pprof.Profile, "symbol": pprof.Symbol, "trace": pprof.Trace} {
		mux.HandleFunc(PprofPath+name, h)
	}
	if m != nil {
		mux.Handle(MetricsPath, m.Handler())
		paths = append(paths, MetricsPath)
	}
	for _, p := range slices.Sorted(maps.Keys(pages)) { // the first bad path is the same every time
		h := pages[p]
		switch {
		case !strings.HasPrefix(p, "/") || p == "/" || p == MetricsPath || strings.HasPrefix(p, PprofPath):
			return nil, fmt.Errorf("debughttp: page path %q: want a path other than /, %s and %s*", p, MetricsPath, PprofPath)
		case h == nil:
			return nil, fmt.Errorf("debughttp: page %q has a nil handler", p)
		}
		mux.Handle(p, h)
		paths = append(paths, p)
	}
	slices.Sort(paths)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>debug</title><ul>\n")
		for _, p := range paths {
			fmt.Fprintf(w, "<li><a href=\"%s\">%s</a>\n", html.EscapeString(p), html.EscapeString(p))
		}
		fmt.Fprint(w, "</ul>\n")
	})

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debughttp: %w", err)
	}
	cl := &capListener{Listener: lis, max: lim.maxConns, conns: map[net.Conn]*connState{}}
	s := &Server{srv: &http.Server{Handler: bounded(mux, lim.requestTimeout), ReadHeaderTimeout: lim.readHeaderTimeout,
		IdleTimeout: lim.idleTimeout, MaxHeaderBytes: maxHeaderBytes, ConnState: cl.track},
		lis: cl, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(cl) }()
	return s, nil
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// URL returns the server's index page, http://host:port/.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" }

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	err := s.srv.Close()
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
