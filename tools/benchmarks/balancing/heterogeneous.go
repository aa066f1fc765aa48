package balancing

import (
	"context"
	"math"
	"slices"
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
	// Weights are those given with SetPeers: in proportion to the workers
	// in the "with" row, all 1 in the others.
	Weights []float64 `json:"weights"`
	// LoadReports: the servers reported their workers' busy share and the
	// client balanced on it.
	LoadReports bool    `json:"load_reports"`
	Rate        float64 `json:"rate"`
	// Measured is the calls after the warmup; Goodput their successes a
	// second as a share of Rate.
	Measured Outcome               `json:"measured"`
	Goodput  float64               `json:"goodput"`
	Servers  []HeterogeneousServer `json:"servers"`
	// MaxShareError is the largest gap between a server's share of the
	// calls and its capacity's, in percentage points.
	MaxShareError float64     `json:"max_share_error_pp"`
	Seconds       [][]float64 `json:"seconds"` // each server's share of the calls, second by second
}

// HeterogeneousServer is one server's figures over the measured stretch.
// Capacity is Workers / service time, CapacityShare its share of all;
// Share is its share of the calls that reached a server. OverCapacity:
// calls came at 98% of its capacity or faster (its queue does not
// drain), or it answered Busy to more than 1% of them.
type HeterogeneousServer struct {
	HostPort      string  `json:"host_port"`
	Workers       int     `json:"workers"`
	Weight        float64 `json:"weight"`
	Capacity      float64 `json:"capacity"`
	CapacityShare float64 `json:"capacity_share"`
	Calls         int     `json:"calls"`
	Share         float64 `json:"share"`
	PerSecond     float64 `json:"per_second"`
	Busy          int     `json:"busy"`
	Timeouts      int     `json:"timeouts"`
	PeakInFlight  int64   `json:"peak_in_flight"`
	MeanInFlight  float64 `json:"mean_in_flight"`
	OverCapacity  bool    `json:"over_capacity"`
}

// overCapacity is the share of its capacity at which a server's queue no
// longer drains.
const overCapacity = 0.98

// runHeterogeneousScenario runs the rows: weighted, all 1, load reports.
func runHeterogeneousScenario(ctx context.Context, c Config) (*HeterogeneousResult, error) {
	h := c.Heterogeneous
	res := &HeterogeneousResult{}
	ones := slices.Repeat([]float64{1}, len(h.Workers))
	for _, r := range []struct {
		row     *HeterogeneousRow
		what    string
		weights []float64
		reports bool
	}{
		{&res.With, "weights " + WeightList(h.Weights), h.Weights, false},
		{&res.Without, "weights all 1", ones, false},
		{&res.LoadReports, "weights all 1, load reports", ones, true},
	} {
		c.progress("heterogeneous, %s: servers of %v workers; %v", r.what, h.Workers, h.Warmup+h.Duration)
		var err error
		if *r.row, err = runHeterogeneous(ctx, c, r.weights, r.reports); err != nil {
			return nil, err
		}
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
	b, err := setup(cfgs, defaultsConfig, weights)
	if err != nil {
		return row, err
	}
	defer b.close()
	measured := span{h.Warmup.D(), (h.Warmup + h.Duration).D()}
	rep, before, after, err := b.run(ctx, c, row.Rate, measured.from, measured.to, nil)
	if err != nil {
		return row, err
	}
	recs, f := rep.Records, b.f
	m := count(recs, measured.has)
	row.Measured = m.outcome()
	row.Goodput = share(float64(m.OK)/measured.seconds(), row.Rate)
	per := byServer(recs, f, measured)
	reached := 0
	for _, t := range per {
		reached += t.Calls
	}
	for i, srv := range f {
		capa := PoolCapacity(h.Workers[i], h.Service.D())
		s := HeterogeneousServer{HostPort: srv.hostPort(), Workers: h.Workers[i], Weight: weights[i],
			Capacity: capa, CapacityShare: capa / h.Capacity(),
			Calls: per[i].Calls, Share: share(float64(per[i].Calls), float64(reached)),
			PerSecond: float64(per[i].Calls) / measured.seconds(), Busy: per[i].Busy, Timeouts: per[i].Timeouts,
			PeakInFlight: after[i].pool.Peak, MeanInFlight: load.MeanInFlight(before[i].pool, after[i].pool)}
		s.OverCapacity = s.PerSecond >= overCapacity*capa || float64(s.Busy) > 0.01*float64(s.Calls)
		row.MaxShareError = max(row.MaxShareError, 100*math.Abs(s.Share-s.CapacityShare))
		row.Servers = append(row.Servers, s)
	}

	d := time.Duration(rep.Elapsed)
	all := perSecond(recs, d, onServers(f, 0, len(f)))
	row.Seconds = make([][]float64, len(all))
	for i := range f {
		for sec, t := range perSecond(recs, d, onServers(f, i, i+1)) {
			row.Seconds[sec] = append(row.Seconds[sec], share(float64(t.Calls), float64(all[sec].Calls)))
		}
	}
	return row, nil
}
