package debughttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/tools/internal/testkit/testhttp"
)

// serveWith starts a listener with lim, closed when the test ends.
func serveWith(t *testing.T, lim limits, pages map[string]http.Handler) *Server {
	t.Helper()
	s, err := serveLimited("127.0.0.1:0", nil, pages, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// long limits: nothing times out within a test unless the test says so.
var long = limits{maxConns: 1000, readHeaderTimeout: time.Hour, idleTimeout: time.Hour, requestTimeout: time.Hour}

// keepAlive is a client connection that makes requests by hand and keeps
// the connection open between them.
type keepAlive struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, s *Server) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{Conn: c, r: bufio.NewReader(c)}
}

// get sends a GET of path and returns the answer's status and body.
func (k *keepAlive) get(t *testing.T, path string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(k, "GET "+path+" HTTP/1.1\r\nHost: debug\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	k.SetReadDeadline(time.Now().Add(testwait.Limit))
	res, err := http.ReadResponse(k.r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, string(b)
}

// try sends a GET of path and reads a 200 answer, or returns why not.
func (k *keepAlive) try(path string) error {
	if _, err := io.WriteString(k, "GET "+path+" HTTP/1.1\r\nHost: debug\r\n\r\n"); err != nil {
		return err
	}
	k.SetReadDeadline(time.Now().Add(testwait.Limit))
	res, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

// closedByServer waits (at most testwait.Limit) for the server to close
// k, reading and dropping whatever else it sends, and fails t if it does
// not.
func (k *keepAlive) closedByServer(t *testing.T, what string) {
	t.Helper()
	k.SetReadDeadline(time.Now().Add(testwait.Limit))
	_, err := io.Copy(io.Discard, k.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server did not close the connection within %v", what, testwait.Limit)
	}
}

// At the cap, a new connection closes one that is between requests
// (the one that has waited longest, as far as the server has seen: the
// test cannot tell which it saw first of two answered at once), so the
// listener holds its cap and every new client gets in.
func TestCapClosesWaitingConnections(t *testing.T) {
	lim := long
	lim.maxConns = 4
	s := serveWith(t, lim, nil)
	var conns []*keepAlive
	for i := 0; i < 10; i++ {
		k := dial(t, s)
		if code, _ := k.get(t, PprofPath+"cmdline"); code != http.StatusOK {
			t.Fatalf("connection %d: status %d", i, code)
		}
		conns = append(conns, k)
	}
	if n := s.lis.held(); n != 4 {
		t.Errorf("the listener holds %d connections, want its cap, 4", n)
	}
	// The server closed the ones it evicted before accepting the next:
	// a request on them finds the connection closed; the rest answer.
	open := 0
	for _, k := range conns {
		if k.try(PprofPath+"cmdline") == nil {
			open++
		}
	}
	if open != 4 {
		t.Errorf("%d of the 10 connections still answer, want the cap, 4", open)
	}
	// A one-shot client gets in too (making room in turn).
	testhttp.OK(t, s.URL())
}

// At the cap with every connection in a request, a new connection is
// closed at once; once a request ends, there is room again.
func TestCapRefusesWhenAllAreBusy(t *testing.T) {
	lim := long
	lim.maxConns = 2
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	s := serveWith(t, lim, map[string]http.Handler{"/block": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "released\n")
	})})
	busy := []*keepAlive{dial(t, s), dial(t, s)}
	for _, k := range busy {
		io.WriteString(k, "GET /block HTTP/1.1\r\nHost: debug\r\n\r\n")
	}
	testwait.Recv(t, entered, "the first request in its handler")
	testwait.Recv(t, entered, "the second request in its handler")
	refused := dial(t, s)
	io.WriteString(refused, "GET / HTTP/1.1\r\nHost: debug\r\n\r\n")
	refused.closedByServer(t, "a third connection with both in a request")
	close(release)
	for _, k := range busy {
		k.SetReadDeadline(time.Now().Add(testwait.Limit))
		res, err := http.ReadResponse(k.r, nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	testhttp.OK(t, s.URL())
}

// A keep-alive connection that sends no new request is closed after
// the idle timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	lim := long
	lim.idleTimeout = 50 * time.Millisecond
	s := serveWith(t, lim, nil)
	k := dial(t, s)
	if code, _ := k.get(t, PprofPath+"cmdline"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	k.closedByServer(t, "an idle keep-alive connection")
}

// A request whose body trickles in is cut off after the request timeout.
func TestTrickledBodyIsCutOff(t *testing.T) {
	lim := long
	lim.requestTimeout = 50 * time.Millisecond
	s := serveWith(t, lim, nil)
	k := dial(t, s)
	io.WriteString(k, "POST "+PprofPath+"symbol HTTP/1.1\r\nHost: debug\r\nContent-Length: 1000\r\n\r\n0x1+")
	k.closedByServer(t, "a request whose body never comes")
}

// An answer the client does not read is cut off after the request
// timeout: its handler returns.
func TestUnreadAnswerIsCutOff(t *testing.T) {
	lim := long
	lim.requestTimeout = 50 * time.Millisecond
	done := make(chan error, 1)
	s := serveWith(t, lim, map[string]http.Handler{"/big": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<16))
		for i := 0; i < 1<<14; i++ { // 1 GiB: more than any socket buffers
			if _, err := w.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	})})
	k := dial(t, s)
	io.WriteString(k, "GET /big HTTP/1.1\r\nHost: debug\r\n\r\n")
	if err := testwait.Recv(t, done, "the handler writing to a client that does not read"); err == nil {
		t.Fatal("the handler wrote 1 GiB to a client that read nothing")
	}
}

// A CPU profile streams for the seconds it asks, longer than the request
// timeout.
func TestProfileOutlivesTheRequestTimeout(t *testing.T) {
	lim := long
	lim.requestTimeout = time.Second
	s := serveWith(t, lim, nil)
	k := dial(t, s)
	code, body := k.get(t, PprofPath+"profile?seconds=2")
	if code != http.StatusOK || len(body) == 0 {
		t.Fatalf("profile: status %d, %d bytes: %.200q", code, len(body), body)
	}
}

func TestStreamFor(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{PprofPath + "profile", 30 * time.Second},
		{PprofPath + "profile?seconds=5", 5 * time.Second},
		{PprofPath + "trace", time.Second},
		{PprofPath + "heap?seconds=10", 10 * time.Second},
		{PprofPath + "profile?seconds=99999999999999", maxProfileSeconds * time.Second},
		{PprofPath + "profile?seconds=-3", 30 * time.Second},
		{"/metrics", 0},
	} {
		r, err := http.NewRequest("GET", "http://x"+tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := streamFor(r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.url, got, tc.want)
		}
	}
}

// held returns how many connections the listener holds.
func (l *capListener) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
