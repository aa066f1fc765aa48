package balancing

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// ScaleOutResult is the scale-out scenario's two rows.
type ScaleOutResult struct {
	With    ScaleOutRow `json:"with"`
	Without ScaleOutRow `json:"without"`
}

// ScaleOutRow is one run of the scale-out scenario.
type ScaleOutRow struct {
	// SlowStart says which row: slow start on (the library's default) or
	// off; ServiceConfig is the client's service config.
	SlowStart     bool   `json:"slow_start"`
	ServiceConfig string `json:"service_config"`
	// Rate is the calls offered a second, all the run long.
	Rate float64 `json:"rate"`
	// ScaleOutAt is when the new servers joined (SetPeers), from the
	// first call's arrival.
	ScaleOutAt load.Seconds `json:"scale_out_at_s"`
	// Calls is every call of the run.
	Calls int `json:"calls"`
	// Steady is the calls of the steady stretch (after the warmup, before
	// the scale-out); After those of the After stretch that follows it,
	// All of them, and New those the new servers answered (or timed out
	// on).
	Steady Outcome `json:"steady"`
	After  Outcome `json:"after"`
	New    Outcome `json:"new"`
	// P99Ratio is After.P99 / Steady.P99.
	P99Ratio float64 `json:"p99_ratio"`
	// Servers are the servers' figures over the After stretch, the first
	// ones then the new ones.
	Servers []ScaleOutServer `json:"servers"`
	// Seconds is the run second by second, from the first call.
	Seconds []ScaleOutSecond `json:"seconds"`
}

// Outcome is what became of a set of calls. P99 is of the successful
// ones; a call refused in the client (THROTTLED) counts in Refused.
type Outcome struct {
	Calls    int         `json:"calls"`
	OK       int         `json:"ok"`
	Busy     int         `json:"busy"`
	Timeouts int         `json:"timeouts"`
	Other    int         `json:"other_failed"`
	Refused  int         `json:"refused"`
	P99      load.Millis `json:"p99_ms"`
}

func outcome(t *tally) Outcome {
	return Outcome{Calls: t.calls, OK: t.ok, Busy: t.busy, Timeouts: t.timeouts, Other: t.other, Refused: t.refused, P99: t.p99()}
}

// ScaleOutServer is one server's share of the After stretch.
type ScaleOutServer struct {
	HostPort string `json:"host_port"`
	New      bool   `json:"new"`
	// Calls reached it (answered or timed out), Busy and Timeouts of
	// them; Shed is the Busy answers it sent, by its own count (over the
	// whole run).
	Calls    int   `json:"calls"`
	Busy     int   `json:"busy"`
	Timeouts int   `json:"timeouts"`
	Shed     int64 `json:"shed"`
}

// ScaleOutSecond is one second of a scale-out run.
type ScaleOutSecond struct {
	Start load.Seconds `json:"start_s"`
	Calls int          `json:"calls"`
	// P99 is of the successful calls that arrived in the second.
	P99 load.Millis `json:"p99_ms"`
	// NewEach and OldEach are the calls each new server, each first
	// server, took in the second, on average.
	NewEach float64 `json:"new_each"`
	OldEach float64 `json:"old_each"`
	// NewFailed is the calls the new servers answered Busy or timed out.
	NewFailed int `json:"new_failed"`
	// NewP99 and OldP99 are the p99 of the successful calls the new
	// servers, and the first ones, answered (0 for none).
	NewP99 load.Millis `json:"new_p99_ms"`
	OldP99 load.Millis `json:"old_p99_ms"`
}

// runScaleOutScenario runs the two rows, slow start on then off.
func runScaleOutScenario(ctx context.Context, c Config) (*ScaleOutResult, error) {
	s := c.ScaleOut
	total := s.Warmup + s.Steady + s.After
	res := &ScaleOutResult{}
	c.progress("scale-out, slow start on: %d servers, %d join cold after %v; %v", s.Servers, s.Added, s.Warmup+s.Steady, total)
	var err error
	if res.With, err = runScaleOut(ctx, c, true); err != nil {
		return nil, err
	}
	c.progress("scale-out, slow start off: %v", total)
	if res.Without, err = runScaleOut(ctx, c, false); err != nil {
		return nil, err
	}
	return res, nil
}

// runScaleOut runs one row.
func runScaleOut(ctx context.Context, c Config, slowStart bool) (ScaleOutRow, error) {
	s := c.ScaleOut
	cfgJSON := noSlowStart
	switch {
	case slowStart && s.WithConfig != "":
		cfgJSON = s.WithConfig
	case slowStart:
		cfgJSON = slowStartConfig(s.SlowStartWindow.D())
	}
	row := ScaleOutRow{SlowStart: slowStart, ServiceConfig: cfgJSON, Rate: s.Load * float64(s.Servers) * PoolCapacity(s.Workers, s.Service.D())}
	warm := make([]serverConfig, s.Servers)
	for i := range warm {
		warm[i] = serverConfig{workers: s.Workers, service: s.Service.D()}
	}
	first, err := startFleet(warm)
	if err != nil {
		return row, err
	}
	defer first.close()
	ch, client, err := newClient(cfgJSON)
	if err != nil {
		return row, err
	}
	defer ch.Close()
	if err := client.SetPeers(first.members(nil)); err != nil {
		return row, err
	}

	var (
		added     fleet
		scaledAt  time.Time
		scaleErr  error
		coldStart = make([]serverConfig, s.Added)
	)
	for i := range coldStart {
		coldStart[i] = serverConfig{workers: s.Workers, service: s.Service.D(), coldFactor: s.ColdFactor, coldWindow: s.ColdWindow.D()}
	}
	t0 := time.Now()
	wait := at(t0, (s.Warmup + s.Steady).D(), func() {
		if added, scaleErr = startFleet(coldStart); scaleErr != nil {
			return
		}
		scaleErr = client.SetPeers(append(append(fleet{}, first...), added...).members(nil))
		scaledAt = time.Now()
	})
	rep, err := runLoad(ctx, client, row.Rate, (s.Warmup + s.Steady + s.After).D(), c.Timeout.D(), nil)
	wait()
	defer added.close()
	switch {
	case err != nil:
		return row, err
	case scaleErr != nil:
		return row, scaleErr
	case scaledAt.IsZero():
		return row, errors.New("the new servers did not join before the load ended")
	}

	recs := rep.Records
	row.Calls = len(recs)
	scale := scaledAt.Sub(rep.Start)
	row.ScaleOutAt = load.Seconds(scale)
	steady, after := span{s.Warmup.D(), scale}, span{scale, scale + s.After.D()}
	newSet := map[string]bool{}
	for _, hp := range added.hostPorts() {
		newSet[hp] = true
	}
	row.Steady = outcome(count(recs, steady.has))
	row.After = outcome(count(recs, after.has))
	row.New = outcome(count(recs, func(r load.Record) bool { return after.has(r) && newSet[r.Peer] }))
	row.P99Ratio = share(float64(row.After.P99), float64(row.Steady.P99))

	all := append(append(fleet{}, first...), added...)
	idx := all.index()
	servers := make([]*tally, len(all))
	for i := range servers {
		servers[i] = &tally{}
	}
	for _, r := range recs {
		if i, ok := idx[r.Peer]; ok && after.has(r) {
			servers[i].add(r)
		}
	}
	for i, srv := range all {
		row.Servers = append(row.Servers, ScaleOutServer{HostPort: srv.hostPort(), New: i >= len(first),
			Calls: servers[i].calls, Busy: servers[i].busy, Timeouts: servers[i].timeouts, Shed: srv.pool.Stats().Shed})
	}

	whole := span{0, time.Duration(rep.Elapsed)}
	secs := perSecond(recs, whole, nil)
	newT, oldT := make([]tally, len(secs)), make([]tally, len(secs))
	for _, r := range recs {
		i, ok := idx[r.Peer]
		if !ok || !whole.has(r) {
			continue
		}
		if sec := int(r.At / time.Second); i < len(first) {
			oldT[sec].add(r)
		} else {
			newT[sec].add(r)
		}
	}
	for sec, t := range secs {
		row.Seconds = append(row.Seconds, ScaleOutSecond{Start: load.Seconds(time.Duration(sec) * time.Second), Calls: t.calls, P99: t.p99(),
			NewEach: float64(newT[sec].calls) / float64(len(added)), OldEach: float64(oldT[sec].calls) / float64(len(first)),
			NewFailed: newT[sec].busy + newT[sec].timeouts, NewP99: newT[sec].p99(), OldP99: oldT[sec].p99()})
	}
	return row, nil
}
