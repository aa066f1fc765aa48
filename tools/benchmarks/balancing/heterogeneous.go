package balancing

import (
	"context"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// HeterogeneousResult is the heterogeneous scenario's three rows: with
// weights, without, and without weights but with the servers' load
// reports (channel.WithUtilisation) balancing the client.
type HeterogeneousResult struct {
	With        HeterogeneousRow `json:"with"`
	Without     HeterogeneousRow `json:"without"`
	LoadReports HeterogeneousRow `json:"load_reports"`
}

// HeterogeneousRow is one run of the heterogeneous scenario.
type HeterogeneousRow struct {
	// Weights are the weights the client gave the servers with SetPeers:
	// in proportion to their workers in the "with" row, all 1 in the
	// others.
	Weights []float64 `json:"weights"`
	// LoadReports: the servers reported their utilisation (their
	// workers' busy time) to the client, which balanced on it.
	LoadReports bool `json:"load_reports"`
	// Rate is the calls offered a second.
	Rate float64 `json:"rate"`
	// Measured is the calls after the warmup; Goodput their successes a
	// second as a share of Rate.
	Measured Outcome `json:"measured"`
	Goodput  float64 `json:"goodput"`
	// Servers are each server's figures over the measured stretch.
	Servers []HeterogeneousServer `json:"servers"`
	// MaxShareError is the largest gap between a server's share of the
	// calls and its capacity's share (which is its weight's in the "with"
	// row), in percentage points.
	MaxShareError float64 `json:"max_share_error_pp"`
	// Seconds holds each server's share of the calls, second by second.
	Seconds [][]float64 `json:"seconds"`
}

// HeterogeneousServer is one server's figures.
type HeterogeneousServer struct {
	HostPort string  `json:"host_port"`
	Workers  int     `json:"workers"`
	Weight   float64 `json:"weight"`
	// Capacity is its calls a second, Workers / service time;
	// CapacityShare its share of the servers' capacity (its weight's
	// share in the "with" row).
	Capacity      float64 `json:"capacity"`
	CapacityShare float64 `json:"capacity_share"`
	// Calls reached it (answered or timed out): Share of all the calls
	// that reached a server, PerSecond a second; Busy and Timeouts of
	// them.
	Calls     int     `json:"calls"`
	Share     float64 `json:"share"`
	PerSecond float64 `json:"per_second"`
	Busy      int     `json:"busy"`
	Timeouts  int     `json:"timeouts"`
	// PeakInFlight and MeanInFlight are the requests it held or queued,
	// at most and on average.
	PeakInFlight int64   `json:"peak_in_flight"`
	MeanInFlight float64 `json:"mean_in_flight"`
	// OverCapacity: calls came at 98% of its capacity or faster (a queue
	// that does not drain, which keeps growing until it sheds), or it
	// answered Busy to more than 1% of them (its queue was full).
	OverCapacity bool `json:"over_capacity"`
}

// overCapacity is the share of its capacity at which calls come too fast
// for a server: its queue no longer drains.
const overCapacity = 0.98

// runHeterogeneousScenario runs the two rows, weighted then not.
func runHeterogeneousScenario(ctx context.Context, c Config) (*HeterogeneousResult, error) {
	h := c.Heterogeneous
	res := &HeterogeneousResult{}
	c.progress("heterogeneous, weights %v: servers of %v workers; %v", h.Weights, h.Workers, h.Warmup+h.Duration)
	var err error
	if res.With, err = runHeterogeneous(ctx, c, h.Weights, false); err != nil {
		return nil, err
	}
	ones := make([]float64, len(h.Workers))
	for i := range ones {
		ones[i] = 1
	}
	c.progress("heterogeneous, weights all 1: %v", h.Warmup+h.Duration)
	if res.Without, err = runHeterogeneous(ctx, c, ones, false); err != nil {
		return nil, err
	}
	c.progress("heterogeneous, weights all 1, load reports: %v", h.Warmup+h.Duration)
	if res.LoadReports, err = runHeterogeneous(ctx, c, ones, true); err != nil {
		return nil, err
	}
	return res, nil
}

// runHeterogeneous runs one row with the given weights, the servers
// reporting their load if reports.
func runHeterogeneous(ctx context.Context, c Config, weights []float64, reports bool) (HeterogeneousRow, error) {
	h := c.Heterogeneous
	row := HeterogeneousRow{Weights: weights, LoadReports: reports, Rate: h.Load * h.Capacity()}
	cfgs := make([]serverConfig, len(h.Workers))
	for i, w := range h.Workers {
		cfgs[i] = serverConfig{workers: w, service: h.Service.D(), reportLoad: reports}
	}
	f, err := startFleet(cfgs)
	if err != nil {
		return row, err
	}
	defer f.close()
	ch, client, err := newClient(defaultsConfig)
	if err != nil {
		return row, err
	}
	defer ch.Close()
	if err := client.SetPeers(f.members(weights)); err != nil {
		return row, err
	}
	var before []load.PoolStats
	wait := at(time.Now(), h.Warmup.D(), func() {
		f.resetPeaks()
		before = f.stats()
	})
	rep, err := runLoad(ctx, client, row.Rate, (h.Warmup + h.Duration).D(), c.Timeout.D(), nil)
	wait()
	if err != nil {
		return row, err
	}
	after := f.stats()
	if before == nil { // the load ended first
		before = after
	}

	recs := rep.Records
	measured := span{h.Warmup.D(), (h.Warmup + h.Duration).D()}
	m := count(recs, measured.has)
	row.Measured = outcome(m)
	row.Goodput = share(float64(m.ok)/measured.seconds(), row.Rate)
	idx := f.index()
	per := make([]*tally, len(f))
	for i := range per {
		per[i] = &tally{}
	}
	reached := 0
	for _, r := range recs {
		if i, ok := idx[r.Peer]; ok && measured.has(r) {
			per[i].add(r)
			reached++
		}
	}
	total := h.Capacity()
	for i, srv := range f {
		capa := PoolCapacity(h.Workers[i], h.Service.D())
		s := HeterogeneousServer{HostPort: srv.hostPort(), Workers: h.Workers[i], Weight: weights[i],
			Capacity: capa, CapacityShare: capa / total,
			Calls: per[i].calls, Share: share(float64(per[i].calls), float64(reached)),
			PerSecond: float64(per[i].calls) / measured.seconds(), Busy: per[i].busy, Timeouts: per[i].timeouts,
			PeakInFlight: after[i].Peak, MeanInFlight: load.MeanInFlight(before[i], after[i])}
		s.OverCapacity = s.PerSecond >= overCapacity*capa || float64(s.Busy) > 0.01*float64(s.Calls)
		row.MaxShareError = max(row.MaxShareError, 100*abs(s.Share-s.CapacityShare))
		row.Servers = append(row.Servers, s)
	}

	secs := perSecond(recs, span{0, time.Duration(rep.Elapsed)}, nil)
	counts := make([][]int, len(secs))
	for i := range counts {
		counts[i] = make([]int, len(f))
	}
	for _, r := range recs {
		if i, ok := idx[r.Peer]; ok {
			counts[int(r.At/time.Second)][i]++
		}
	}
	for _, cs := range counts {
		n := 0
		for _, v := range cs {
			n += v
		}
		shares := make([]float64, len(cs))
		for i, v := range cs {
			shares[i] = share(float64(v), float64(n))
		}
		row.Seconds = append(row.Seconds, shares)
	}
	return row, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
