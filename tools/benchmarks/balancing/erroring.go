package balancing

import (
	"context"
	"time"

	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
)

// ErroringResult is the erroring scenario's four rows: one erroring
// server with ejection and without, then Many erroring servers with and
// without.
type ErroringResult struct {
	OneWith     ErroringRow `json:"one_with"`
	OneWithout  ErroringRow `json:"one_without"`
	ManyWith    ErroringRow `json:"many_with"`
	ManyWithout ErroringRow `json:"many_without"`
}

// Rows returns the four rows in the table's order.
func (r *ErroringResult) Rows() []*ErroringRow {
	return []*ErroringRow{&r.OneWith, &r.OneWithout, &r.ManyWith, &r.ManyWithout}
}

// ErroringRow is one run of the erroring scenario: Erroring servers
// answer UNEXPECTED to ErrorShare of their calls, ejection on or off.
type ErroringRow struct {
	Erroring      int     `json:"erroring"`
	Ejection      bool    `json:"ejection"`
	ServiceConfig string  `json:"service_config"`
	Rate          float64 `json:"rate"`
	All           Outcome `json:"all"`          // every call
	SuccessRate   float64 `json:"success_rate"` // All.OK / All.Calls
	// FirstEjection is when a peer was first seen ejected, from the first
	// call; the *After figures are from then on, all null if never.
	// ToErroring* are the shares of the calls that reached an erroring
	// server.
	FirstEjection    *load.Seconds `json:"first_ejection_s"`
	FailedBefore     float64       `json:"failed_per_s_before"`
	FailedAfter      *float64      `json:"failed_per_s_after"`
	ToErroringBefore float64       `json:"to_erroring_before"`
	ToErroringAfter  *float64      `json:"to_erroring_after"`
	// MaxEjected is the most peers seen ejected at once; Ejections the
	// ejections the client counted in all.
	MaxEjected int              `json:"max_ejected"`
	Ejections  uint64           `json:"ejections"`
	Seconds    []ErroringSecond `json:"seconds"`
}

// ErroringSecond is one second of an erroring run.
type ErroringSecond struct {
	Start      load.Seconds `json:"start_s"`
	Calls      int          `json:"calls"`
	Failed     int          `json:"failed"`
	ToErroring int          `json:"to_erroring"`
	Ejected    int          `json:"ejected"` // the most at once
}

// runErroringScenario runs the four rows.
func runErroringScenario(ctx context.Context, c Config) (*ErroringResult, error) {
	e := c.Erroring
	res := &ErroringResult{}
	for _, r := range []struct {
		row      *ErroringRow
		erroring int
		ejection bool
	}{{&res.OneWith, 1, true}, {&res.OneWithout, 1, false}, {&res.ManyWith, e.Many, true}, {&res.ManyWithout, e.Many, false}} {
		c.progress("erroring, %d of %d servers failing %.0f%% of their calls, ejection %s; %v",
			r.erroring, e.Servers, 100*e.ErrorShare, benchrun.OnOff(r.ejection), e.Duration)
		var err error
		if *r.row, err = runErroring(ctx, c, r.erroring, r.ejection); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// runErroring runs one row: the first erroring servers fail.
func runErroring(ctx context.Context, c Config, erroring int, ejection bool) (ErroringRow, error) {
	e := c.Erroring
	cfgJSON := noEjection
	if ejection {
		cfgJSON = defaultsConfig
	}
	row := ErroringRow{Erroring: erroring, Ejection: ejection, ServiceConfig: cfgJSON, Rate: e.Rate}
	cfgs := make([]serverConfig, e.Servers)
	for i := range cfgs {
		cfgs[i] = serverConfig{workers: e.Workers, service: e.Service.D(), seed: c.Seed + uint64(i)}
		if i < erroring {
			cfgs[i].errorShare = e.ErrorShare
		}
	}
	b, err := setup(cfgs, cfgJSON, nil)
	if err != nil {
		return row, err
	}
	defer b.close()

	type sample struct {
		at      time.Time
		ejected int
	}
	var samples []sample
	stop := load.Every(e.Sample.D(), func(now time.Time) {
		n := 0
		for _, p := range b.client.Peers() {
			if p.Ejected.After(now) {
				n++
			}
		}
		samples = append(samples, sample{now, n})
	})
	rep, _, _, err := b.run(ctx, c, e.Rate, 0, e.Duration.D(), nil)
	stop()
	if err != nil {
		return row, err
	}
	for _, p := range b.client.Peers() {
		row.Ejections += p.Ejections
	}

	recs := rep.Records
	whole := span{0, time.Duration(rep.Elapsed)}
	row.All = count(recs, whole.has).outcome()
	row.SuccessRate = share(float64(row.All.OK), float64(row.All.Calls))
	bad := onServers(b.f, 0, erroring)
	ejectedPerSec := make([]int, int((whole.to+time.Second-1)/time.Second))
	first := time.Duration(-1)
	for _, s := range samples {
		off := s.at.Sub(rep.Start)
		row.MaxEjected = max(row.MaxEjected, s.ejected)
		if s.ejected > 0 && first < 0 {
			first = max(off, 0)
		}
		if sec := int(off / time.Second); off >= 0 && sec < len(ejectedPerSec) {
			ejectedPerSec[sec] = max(ejectedPerSec[sec], s.ejected)
		}
	}
	toBad := func(sp span) float64 {
		return share(float64(count(recs, func(r load.Record) bool { return sp.has(r) && bad(r) }).Calls),
			float64(count(recs, sp.has).Calls))
	}
	before := whole
	if first >= 0 {
		before = span{0, first}
		after := span{first, whole.to}
		row.FirstEjection = new(load.Seconds(first))
		row.FailedAfter = new(float64(count(recs, after.has).failed()) / after.seconds())
		row.ToErroringAfter = new(toBad(after))
	}
	if before.to > 0 {
		row.FailedBefore = float64(count(recs, before.has).failed()) / before.seconds()
	}
	row.ToErroringBefore = toBad(before)

	toBadPerSec := perSecond(recs, whole.to, bad)
	for sec, t := range perSecond(recs, whole.to, nil) {
		row.Seconds = append(row.Seconds, ErroringSecond{Start: load.Seconds(time.Duration(sec) * time.Second), Calls: t.Calls,
			Failed: t.failed(), ToErroring: toBadPerSec[sec].Calls, Ejected: ejectedPerSec[sec]})
	}
	return row, nil
}
