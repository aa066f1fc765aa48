package load

import (
	"sync/atomic"
	"time"
)

// The sets a call's latency falls in, apart.
const (
	setOK = iota
	setFailed
	setRefused
)

// set returns the set r falls in.
func (r result) set() int {
	switch {
	case r.Code == "":
		return setOK
	case r.Local:
		return setRefused
	}
	return setFailed
}

// counts are the running totals Progress reports.
type counts struct{ sets [3]atomic.Int64 }

func (c *counts) add(r result) { c.sets[r.set()].Add(1) }

// tally counts calls as a Report does, their latencies exact (a list, a
// rate run's) or in histograms (an unbounded run's), and with peers
// (Config.PerPeer) by peer too. Not safe for concurrent use: an unbounded
// run's callers keep one each.
type tally struct {
	exact              bool
	lists              [3][]time.Duration
	hists              [3]hist
	attempts, late     int
	errors, exceptions map[string]int
	peers              map[string]*tally // by host:port; nil without PerPeer
}

func newTally(exact, perPeer bool) *tally {
	t := &tally{exact: exact, errors: map[string]int{}, exceptions: map[string]int{}}
	if perPeer {
		t.peers = map[string]*tally{}
	}
	return t
}

// add counts r, of latency lat.
func (t *tally) add(r result, lat time.Duration) {
	k := r.set()
	if t.exact {
		t.lists[k] = append(t.lists[k], lat)
	} else {
		t.hists[k].add(lat)
	}
	t.attempts += r.attempts
	if r.late {
		t.late++
	}
	if r.Code != "" {
		t.errors[r.Code]++
	}
	if r.exception != "" {
		t.exceptions[r.exception]++
	}
	if t.peers != nil && r.Peer != "" {
		t.peer(r.Peer).add(r, lat)
	}
}

// merge adds o's calls to t.
func (t *tally) merge(o *tally) {
	for k := range t.lists {
		t.lists[k] = append(t.lists[k], o.lists[k]...)
		t.hists[k].merge(&o.hists[k])
	}
	t.attempts += o.attempts
	t.late += o.late
	for c, n := range o.errors {
		t.errors[c] += n
	}
	for e, n := range o.exceptions {
		t.exceptions[e] += n
	}
	for p, pt := range o.peers {
		t.peer(p).merge(pt)
	}
}

// quantiles returns set k's latency quantiles.
func (t *tally) quantiles(k int) Quantiles {
	if t.exact {
		return quantiles(t.lists[k])
	}
	return t.hists[k].quantiles()
}

// report returns the Report of t's calls over elapsed.
func (t *tally) report(elapsed time.Duration) *Report {
	r := &Report{Elapsed: Seconds(elapsed), Errors: t.errors, Attempts: t.attempts, Late: t.late,
		Latency: t.quantiles(setOK), FailedLatency: t.quantiles(setFailed), RefusedLatency: t.quantiles(setRefused),
		Exceptions: exceptionCounts(t.exceptions)}
	r.OK, r.Failed, r.Refused = r.Latency.Count, r.FailedLatency.Count, r.RefusedLatency.Count
	r.Calls = r.OK + r.Failed + r.Refused
	if r.Calls > 0 {
		r.AttemptsPerCall = float64(r.Attempts) / float64(r.Calls)
		r.ExtraPercent = (r.AttemptsPerCall - 1) * 100
	}
	if el := elapsed.Seconds(); el > 0 {
		r.Throughput = float64(r.OK) / el
	}
	return r
}

// peer returns the tally of peer p, adding it if need be.
func (t *tally) peer(p string) *tally {
	if t.peers[p] == nil {
		t.peers[p] = newTally(t.exact, false)
	}
	return t.peers[p]
}
