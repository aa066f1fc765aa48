package balancing

import (
	"context"
	"errors"
	"slices"
	"strconv"
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
	// SlowStart says which row; ServiceConfig is the client's.
	SlowStart     bool         `json:"slow_start"`
	ServiceConfig string       `json:"service_config"`
	Rate          float64      `json:"rate"`
	ScaleOutAt    load.Seconds `json:"scale_out_at_s"` // when the new servers joined, from the first call
	Calls         int          `json:"calls"`
	// Steady is the calls after the warmup and before the scale-out, After
	// those of the After stretch, New those the new servers took.
	Steady   Outcome          `json:"steady"`
	After    Outcome          `json:"after"`
	New      Outcome          `json:"new"`
	P99Ratio float64          `json:"p99_ratio"` // After.P99 / Steady.P99
	Servers  []ScaleOutServer `json:"servers"`   // the first servers then the new ones, over After
	Seconds  []ScaleOutSecond `json:"seconds"`
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

// ScaleOutServer is one server's share of the After stretch: the calls
// that reached it, and Shed, the Busy answers it sent over the run.
type ScaleOutServer struct {
	HostPort string `json:"host_port"`
	New      bool   `json:"new"`
	Calls    int    `json:"calls"`
	Busy     int    `json:"busy"`
	Timeouts int    `json:"timeouts"`
	Shed     int64  `json:"shed"`
}

// ScaleOutSecond is one second of a scale-out run: the p99 of its
// successful calls, the calls each new and each first server took on
// average, the new servers' Busy answers and timeouts, and the p99 of
// each kind (0 for none).
type ScaleOutSecond struct {
	Start     load.Seconds `json:"start_s"`
	Calls     int          `json:"calls"`
	P99       load.Millis  `json:"p99_ms"`
	NewEach   float64      `json:"new_each"`
	OldEach   float64      `json:"old_each"`
	NewFailed int          `json:"new_failed"`
	NewP99    load.Millis  `json:"new_p99_ms"`
	OldP99    load.Millis  `json:"old_p99_ms"`
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
	case slowStart && s.SlowStartWindow > 0:
		cfgJSON = `{"balancing": [{"slowStart": {"window": "` + strconv.FormatFloat(s.SlowStartWindow.D().Seconds(), 'f', -1, 64) + `s"}}]}`
	case slowStart:
		cfgJSON = defaultsConfig // the library's window
	}
	row := ScaleOutRow{SlowStart: slowStart, ServiceConfig: cfgJSON, Rate: s.Load * float64(s.Servers) * PoolCapacity(s.Workers, s.Service.D())}
	cfgs := make([]serverConfig, s.Servers+s.Added) // the first, then the cold ones
	for i := range cfgs {
		cfgs[i] = serverConfig{workers: s.Workers, service: s.Service.D()}
		if i >= s.Servers {
			cfgs[i].coldFactor, cfgs[i].coldWindow = s.ColdFactor, s.ColdWindow.D()
		}
	}
	b, err := setup(cfgs[:s.Servers], cfgJSON, nil)
	if err != nil {
		return row, err
	}
	defer b.close()
	first := b.f
	var (
		added, all fleet
		scaledAt   time.Time
		scaleErr   error
	)
	wait := at(time.Now(), (s.Warmup + s.Steady).D(), func() {
		if added, scaleErr = startFleet(cfgs[s.Servers:]); scaleErr != nil {
			return
		}
		all = append(slices.Clone(first), added...)
		scaleErr = b.client.SetPeers(all.members(nil))
		scaledAt = time.Now()
	})
	rep, _, _, err := b.run(ctx, c, row.Rate, 0, (s.Warmup + s.Steady + s.After).D(), nil)
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
	row.Steady = count(recs, steady.has).outcome()
	row.After = count(recs, after.has).outcome()
	isNew, isOld := onServers(all, len(first), len(all)), onServers(all, 0, len(first))
	row.New = count(recs, func(r load.Record) bool { return after.has(r) && isNew(r) }).outcome()
	servers := byServer(recs, all, after)
	for i, srv := range all {
		t := servers[i]
		row.Servers = append(row.Servers, ScaleOutServer{HostPort: srv.hostPort(), New: i >= len(first),
			Calls: t.Calls, Busy: t.Busy, Timeouts: t.Timeouts, Shed: srv.pool.Stats().Shed})
	}
	row.P99Ratio = share(float64(row.After.P99), float64(row.Steady.P99))

	d := time.Duration(rep.Elapsed)
	secs, newS, oldS := perSecond(recs, d, nil), perSecond(recs, d, isNew), perSecond(recs, d, isOld)
	for sec, t := range secs {
		n, o := newS[sec], oldS[sec]
		row.Seconds = append(row.Seconds, ScaleOutSecond{Start: load.Seconds(time.Duration(sec) * time.Second), Calls: t.Calls, P99: t.p99(),
			NewEach: float64(n.Calls) / float64(len(added)), OldEach: float64(o.Calls) / float64(len(first)),
			NewFailed: n.Busy + n.Timeouts, NewP99: n.p99(), OldP99: o.p99()})
	}
	return row, nil
}
