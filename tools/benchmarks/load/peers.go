package load

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/peer"
	"github.com/sluice-rpc/sluice/tools/internal/table"
)

// PeerReport is what became of the calls of a run that one peer ended
// (Report.PerPeer, when Config.PerPeer asks), counted as Report counts
// them; Sent, Busy and Throttled are its peer counts over every
// connection. Left: the peer was gone at the end of the run, its counts
// those last read.
type PeerReport struct {
	Peer      string         `json:"peer"`
	Calls     int            `json:"calls"`
	OK        int            `json:"ok"`
	Failed    int            `json:"failed"`
	Refused   int            `json:"refused"`
	Errors    map[string]int `json:"errors"`
	Latency   Quantiles      `json:"latency_ms"`
	Sent      uint64         `json:"sent"`
	Busy      uint64         `json:"busy"`
	Throttled uint64         `json:"throttled"`
	Left      bool           `json:"left"`
}

// ExceptionCount is how many calls ended in one application error, named
// by Config.Exception (Report.Exceptions).
type ExceptionCount struct {
	Exception string `json:"exception"`
	Calls     int    `json:"calls"`
}

// ledgerEvery is how often a run reads its Clients' peer counts, so that a
// peer that leaves during the run keeps what it was last read to have.
const ledgerEvery = 50 * time.Millisecond

// ledgerKey is a peer of one of a run's Clients.
type ledgerKey struct {
	client   int
	hostPort string
}

// peerLedger keeps the peer counts of a run's Clients from the run's
// start, read every ledgerEvery and at the end: a peer the Clients drop
// keeps the counts last read; one that comes back adds to them.
type peerLedger struct {
	cls     []*channel.Client
	last    map[ledgerKey]peer.Counts // last read
	sum     map[ledgerKey]peer.Counts // since the start
	present map[string]bool           // host:ports of the Clients at the last read
	stop    func()
}

// newPeerLedger reads cls' counts, the run's start, and goes on reading
// them every ledgerEvery until stop.
func newPeerLedger(cls []*channel.Client) *peerLedger {
	l := &peerLedger{cls: cls, last: map[ledgerKey]peer.Counts{}, sum: map[ledgerKey]peer.Counts{}}
	l.read()
	clear(l.sum) // the counts at the start are not the run's
	l.stop = Every(ledgerEvery, func(time.Time) { l.read() })
	return l
}

// Every calls f every period on a goroutine of its own until stop, which
// waits for it and may be called again.
func Every(period time.Duration, f func(now time.Time)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				f(now)
			case <-done:
				return
			}
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}

// read reads the Clients' peer counts.
func (l *peerLedger) read() {
	l.present = map[string]bool{}
	for i, cl := range l.cls {
		for _, c := range cl.Peers() {
			k := ledgerKey{i, c.HostPort}
			l.present[c.HostPort] = true
			prev := l.last[k] // zero for a peer new since the start
			if c.Sent < prev.Sent || c.Busy < prev.Busy || c.Throttled < prev.Throttled {
				prev = peer.Counts{} // a new peer under the same host:port
			}
			l.sum[k], l.last[k] = addCounts(l.sum[k], c, prev), c
		}
	}
}

// addCounts returns a + b - c, count by count.
func addCounts(a, b, c peer.Counts) peer.Counts {
	a.Sent, a.Busy, a.Throttled = a.Sent+b.Sent-c.Sent, a.Busy+b.Busy-c.Busy, a.Throttled+b.Throttled-c.Throttled
	return a
}

// fillPeers sets r's Sent, Busy and Throttled from the ledger, and when
// t, r's tally, has peers (Config.PerPeer) its PerPeer: a report for every
// peer that ended a call or had a count, sorted by host:port.
func (r *Report) fillPeers(l *peerLedger, t *tally) {
	totals := map[string]peer.Counts{} // each host:port's, over every Client
	var all peer.Counts
	for k, c := range l.sum {
		totals[k.hostPort], all = addCounts(totals[k.hostPort], c, peer.Counts{}), addCounts(all, c, peer.Counts{})
	}
	r.Sent, r.Busy, r.Throttled = all.Sent, all.Busy, all.Throttled
	if t.peers == nil {
		return
	}
	for p, c := range totals {
		if c.Sent+c.Busy+c.Throttled > 0 {
			t.peer(p) // empty if no call ended there
		}
	}
	r.PerPeer = []PeerReport{}
	for _, p := range slices.Sorted(maps.Keys(t.peers)) {
		pr, c := t.peers[p].report(0), totals[p]
		r.PerPeer = append(r.PerPeer, PeerReport{Peer: p, Calls: pr.Calls, OK: pr.OK, Failed: pr.Failed, Refused: pr.Refused,
			Errors: pr.Errors, Latency: pr.Latency, Sent: c.Sent, Busy: c.Busy, Throttled: c.Throttled, Left: !l.present[p]})
	}
}

// printPeers writes the per-peer rows, a table under a "per peer" line.
func (r *Report) printPeers(w io.Writer) {
	if r.PerPeer == nil {
		return
	}
	if len(r.PerPeer) == 0 {
		fmt.Fprintf(w, "per peer    no call reached a peer\n")
		return
	}
	fmt.Fprintf(w, "per peer\n")
	// The table is indented under the "per peer" line.
	rows := [][]string{{"  peer", "calls", "ok", "failed", "refused", "p50", "p99", "max", "sent", "busy", "throttled", "errors"}}
	for _, p := range r.PerPeer {
		name := "  " + p.Peer
		if p.Left {
			name += " (left)"
		}
		lat := []string{"-", "-", "-"}
		if p.OK > 0 {
			lat = []string{p.Latency.P50.String(), p.Latency.P99.String(), p.Latency.Max.String()}
		}
		rows = append(rows, append(append([]string{name, fmt.Sprint(p.Calls), fmt.Sprint(p.OK), fmt.Sprint(p.Failed), fmt.Sprint(p.Refused)},
			lat...), fmt.Sprint(p.Sent), fmt.Sprint(p.Busy), fmt.Sprint(p.Throttled), errorList(p.Errors, nil)))
	}
	table.Write(w, rows, false, false) // Print's writes do not report errors
}
