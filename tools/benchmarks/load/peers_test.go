package load

import (
	"context"
	"strings"
	"testing"
	"time"
)

// With PerPeer, a rate run over three servers reports each: its calls add
// up to the run's, each successful call is in its peer's latency, and the
// attempts it was sent are its calls (no retries). The server removed from
// the client during the run keeps its row, marked Left, with the calls it
// answered before it left.
func TestRunPerPeerKeepsAPeerThatLeft(t *testing.T) {
	s := startServers(t, 3, ServerConfig{Service: "kv", Method: "get", Shape: Fixed(time.Millisecond)})
	c := startClient(t, s, "kv", nil)
	gone := s.HostPorts()[0]
	reports := 0
	r, err := Run(context.Background(), c, Config{Method: "get", RPS: 400, Calls: 200, PerPeer: true, Warmup: 1,
		ProgressEvery: 50 * time.Millisecond, Progress: func(Progress) {
			// The third report, 150 ms in: the ledger, read every 50 ms,
			// has seen the peer's first attempts.
			if reports++; reports == 3 {
				if err := c.RemovePeer(gone); err != nil {
					t.Error(err)
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if reports < 3 || r.OK != 200 {
		t.Fatalf("%d progress reports, %d of %d calls ok: want the peer removed during a run of 200 ok calls", reports, r.OK, r.Calls)
	}
	if len(r.PerPeer) != 3 {
		t.Fatalf("per peer %+v, want the three servers", r.PerPeer)
	}
	calls := 0
	var sent uint64
	for i, p := range r.PerPeer {
		if i > 0 && p.Peer <= r.PerPeer[i-1].Peer {
			t.Errorf("per peer not sorted by host:port: %q after %q", p.Peer, r.PerPeer[i-1].Peer)
		}
		calls, sent = calls+p.Calls, sent+p.Sent
		if p.Calls == 0 || p.OK != p.Calls || p.Latency.Count != p.OK || time.Duration(p.Latency.P50) < time.Millisecond || len(p.Errors) != 0 {
			t.Errorf("peer %+v: want calls, all ok and timed (>= 1 ms), no errors", p)
		}
		switch {
		case p.Peer == gone && (!p.Left || p.Sent > uint64(p.Calls)):
			t.Errorf("the removed peer %+v: want left, sent at most its calls (the counts last read)", p)
		case p.Peer != gone && (p.Left || p.Sent != uint64(p.Calls)):
			t.Errorf("peer %+v: want not left, sent exactly its calls", p)
		}
	}
	if calls != r.Calls || sent != r.Sent {
		t.Errorf("per peer: %d calls, %d sent; the run: %d, %d", calls, sent, r.Calls, r.Sent)
	}
	var sb strings.Builder
	r.Print(&sb)
	for _, want := range []string{"per peer\n", "  peer  ", gone + " (left)  "} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Print output lacks %q:\n%s", want, sb.String())
		}
	}
}

// An unbounded run reports its peers too, from the callers' histograms;
// without PerPeer, no row.
func TestRunPerPeerUnbounded(t *testing.T) {
	s := startServers(t, 3, ServerConfig{Service: "kv", Method: "get"})
	c := startClient(t, s, "kv", nil)
	r, err := Run(context.Background(), c, Config{Method: "get", Calls: 300, Concurrency: 3, PerPeer: true})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, p := range r.PerPeer {
		calls += p.Calls
		if p.Calls == 0 || p.OK != p.Calls || p.Latency.Count != p.OK || p.Latency.Max == 0 || p.Sent != uint64(p.Calls) || p.Left {
			t.Errorf("peer %+v: want calls, all ok and timed, as many sent", p)
		}
	}
	if len(r.PerPeer) != 3 || calls != 300 || r.Calls != 300 {
		t.Errorf("%d calls over %d peers (%+v), want 300 over 3", calls, len(r.PerPeer), r.PerPeer)
	}
	r, err = Run(context.Background(), c, Config{Method: "get", Calls: 10})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	r.Print(&sb)
	if r.PerPeer != nil || strings.Contains(sb.String(), "per peer") {
		t.Errorf("without PerPeer: %+v, and the table:\n%s", r.PerPeer, sb.String())
	}
}

// Exceptions lists the named application errors most first, and the
// error list names them beside APPLICATION.
func TestExceptionCounts(t *testing.T) {
	got := exceptionCounts(map[string]int{"Conflict": 1, "KeyNotFound": 4, "Aardvark": 1})
	if len(got) != 3 || got[0] != (ExceptionCount{"KeyNotFound", 4}) || got[1].Exception != "Aardvark" || got[2].Exception != "Conflict" {
		t.Errorf("exceptionCounts = %+v, want KeyNotFound 4, then the ties by name", got)
	}
	if exceptionCounts(nil) != nil {
		t.Error("no exception: want nil (no application_errors in the JSON)")
	}
	r := &Report{Errors: map[string]int{"APPLICATION": 6, "BUSY": 2}, Exceptions: got}
	if s, want := r.ErrorList(), "APPLICATION 6 (KeyNotFound 4, Aardvark 1, Conflict 1), BUSY 2"; s != want {
		t.Errorf("ErrorList() = %q, want %q", s, want)
	}
}
