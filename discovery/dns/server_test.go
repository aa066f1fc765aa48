package dns_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

// server is a real DNS server on 127.0.0.1, UDP and TCP on one port,
// answering from a zone the test changes as it goes.
type server struct {
	addr string // 127.0.0.1:port

	mu       sync.Mutex
	rrs      map[string][]mdns.RR // by lower-case absolute name
	servfail map[string]bool      // names answered with SERVFAIL
	silent   bool                 // no answer at all
	queries  map[query]int
	changed  chan struct{} // closed, and replaced, at each query
}

type query struct {
	qtype uint16
	name  string
}

// startServer starts a server with an empty zone; the test's cleanup stops
// it.
func startServer(t *testing.T) *server {
	t.Helper()
	s := &server{rrs: map[string][]mdns.RR{}, servfail: map[string]bool{}, queries: map[query]int{}, changed: make(chan struct{})}
	var pc net.PacketConn
	var l net.Listener
	for try := 0; ; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if try == 10 {
			t.Fatalf("no port free for both UDP and TCP: %v", err)
		}
	}
	s.addr = pc.LocalAddr().String()
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: s}, {Listener: l, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		served := make(chan error, 1)
		go func() { served <- srv.ActivateAndServe() }()
		testwait.Recv(t, started, "the DNS server to start")
		t.Cleanup(func() {
			if err := srv.Shutdown(); err != nil {
				t.Errorf("DNS server shutdown: %v", err)
			}
			testwait.Recv(t, served, "the DNS server to stop")
		})
	}
	return s
}

// set replaces the records of name (absolute, with its final dot) with
// rrs, each in zone file form after the name ("A 127.0.0.1", "SRV 0 10
// 4041 a.kv.test."); none removes the name.
func (s *server) set(t *testing.T, name string, rrs ...string) {
	t.Helper()
	var parsed []mdns.RR
	for _, r := range rrs {
		rr, err := mdns.NewRR(name + " 0 IN " + r)
		if err != nil {
			t.Fatalf("record %q: %v", r, err)
		}
		parsed = append(parsed, rr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(parsed) == 0 {
		delete(s.rrs, strings.ToLower(name))
		return
	}
	s.rrs[strings.ToLower(name)] = parsed
}

// setServfail makes the server answer queries for name with SERVFAIL, or
// stop doing so.
func (s *server) setServfail(name string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servfail[strings.ToLower(name)] = on
}

// setSilent makes the server drop every query unanswered, or stop doing
// so.
func (s *server) setSilent(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent = on
}

// count returns the number of queries of type qtype for name received.
func (s *server) count(qtype uint16, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[query{qtype, strings.ToLower(name)}]
}

// waitQueries waits until the server has received at least n queries of
// type qtype for name.
func (s *server) waitQueries(t *testing.T, qtype uint16, name string, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		got, changed := s.queries[query{qtype, strings.ToLower(name)}], s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		testwait.Recv(t, changed, fmt.Sprintf("%d %s queries for %s (have %d)", n, mdns.TypeToString[qtype], name, got))
	}
}

func (s *server) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	if len(req.Question) != 1 {
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	s.queries[query{q.Qtype, name}]++
	close(s.changed)
	s.changed = make(chan struct{})
	silent, fail := s.silent, s.servfail[name]
	rrs, exists := s.rrs[name]
	s.mu.Unlock()
	if silent {
		return
	}
	m := new(mdns.Msg)
	m.SetReply(req)
	// Authoritative, or Go's resolver takes an empty answer for a lame
	// referral.
	m.Authoritative = true
	switch {
	case fail:
		m.Rcode = mdns.RcodeServerFailure
	case !exists:
		m.Rcode = mdns.RcodeNameError
	default:
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	w.WriteMsg(m)
}

// Queries wait at most this long for an answer in the tests that expect
// one; far above a loopback round trip.
const lookupTimeout = 10 * time.Second
