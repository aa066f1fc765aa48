package closedloop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// Shedding is what a server does above its capacity.
type Shedding string

// The server sheddings.
const (
	NoShedding       Shedding = "none"
	FixedShedding    Shedding = "fixed"
	AdaptiveShedding Shedding = "adaptive"
)

// Config is one closed-loop comparison.
type Config struct {
	// Workers and Service set the capacity, Workers / Service. Defaults
	// 8 and 2 ms (4,000 calls/s).
	Workers int             `json:"workers"`
	Service millis.Duration `json:"service_ms"`
	// Load is the offered rate as a multiple of the capacity. Default 2.
	Load float64 `json:"load"`
	// Duration is how long calls arrive in each run. Default 10 s.
	Duration millis.Duration `json:"duration_ms"`
	// Timeout is each call's deadline. Default 1 s.
	Timeout millis.Duration `json:"timeout_ms"`
	// FixedLimit is fixed shedding's MaxInFlight. Default 2 x Workers.
	FixedLimit int `json:"fixed_limit"`
	// GCPercent is GOGC while Run runs (see benchrun.DefaultGCPercent);
	// negative keeps the process's setting.
	GCPercent int `json:"gc_percent"`
	// Mix, if not empty, splits the offered calls between criticality
	// classes, spread evenly through the run; the percents sum to 100.
	Mix []Share `json:"mix,omitzero"`
	// Callers, if not 0, offers the load from that many client Channels
	// (2 to MaxCallers), named caller-1 ... caller-N; caller-1 offers
	// HeavyFactor (default 1) times each other's rate. Together they
	// still offer Load x C.
	Callers     int     `json:"callers,omitzero"`
	HeavyFactor float64 `json:"heavy_factor,omitzero"`
	// Sheddings and Throttlings select the combinations Run runs; nil
	// runs them all.
	Sheddings   []Shedding `json:"sheddings,omitzero"`
	Throttlings []bool     `json:"throttlings,omitzero"`
	// Progress, if not nil, is told when each run starts.
	Progress func(string) `json:"-"`
}

// DefaultGCPercent is Config.GCPercent's default.
const DefaultGCPercent = benchrun.DefaultGCPercent

// Bounds of a Config.
const (
	MaxWorkers  = 10_000
	MaxDuration = 10 * time.Minute
)

func (c Config) withDefaults() Config {
	benchrun.Default(&c.Workers, 8)
	benchrun.Default(&c.Service, millis.Duration(2*time.Millisecond))
	benchrun.Default(&c.Load, 2)
	benchrun.Default(&c.Duration, millis.Duration(10*time.Second))
	benchrun.Default(&c.Timeout, millis.Duration(time.Second))
	benchrun.Default(&c.FixedLimit, 2*c.Workers)
	benchrun.Default(&c.GCPercent, DefaultGCPercent)
	if c.Callers > 0 {
		benchrun.Default(&c.HeavyFactor, 1)
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	return c
}

// paired reports whether c's rows come in pairs, unaware and aware.
func (c Config) paired() bool { return len(c.Mix) > 0 || c.Callers > 0 }

// Validate reports the first field out of range.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("closedloop: Workers is %d, must be in [1, %d]", c.Workers, MaxWorkers)
	case c.Service.D() < 100*time.Microsecond || c.Service.D() > time.Second:
		return fmt.Errorf("closedloop: Service is %v, must be in [100µs, 1s]", c.Service)
	case !(c.Load > 0 && c.Load <= 100):
		return fmt.Errorf("closedloop: Load is %v, must be in (0, 100]", c.Load)
	case c.Duration.D() < time.Second || c.Duration.D() > MaxDuration:
		return fmt.Errorf("closedloop: Duration is %v, must be in [1s, %v]", c.Duration, MaxDuration)
	case c.Timeout <= 0 || c.Timeout.D() > load.MaxTimeout:
		return fmt.Errorf("closedloop: Timeout is %v, must be in (0, %v]", c.Timeout, load.MaxTimeout)
	case c.FixedLimit < 1:
		return fmt.Errorf("closedloop: FixedLimit is %d, must be >= 1", c.FixedLimit)
	}
	if rps := c.Capacity() * c.Load; rps > load.MaxRPS {
		return fmt.Errorf("closedloop: the offered rate would be %.0f calls/s, more than %d", rps, load.MaxRPS)
	}
	if len(c.Mix) > 0 {
		if err := checkMix(c.Mix); err != nil {
			return fmt.Errorf("closedloop: Mix: %v", err)
		}
	}
	switch {
	case c.Callers != 0 && (c.Callers < 2 || c.Callers > MaxCallers):
		return fmt.Errorf("closedloop: Callers is %d, must be 0 (one client) or in [2, %d]", c.Callers, MaxCallers)
	case c.Callers == 0 && c.HeavyFactor != 0:
		return fmt.Errorf("closedloop: HeavyFactor is %v, needs Callers", c.HeavyFactor)
	case c.Callers != 0 && !(c.HeavyFactor >= 1 && c.HeavyFactor <= MaxHeavyFactor):
		return fmt.Errorf("closedloop: HeavyFactor is %v, must be in [1, %d]", c.HeavyFactor, MaxHeavyFactor)
	case c.Sheddings != nil && len(c.Sheddings) == 0:
		return errors.New("closedloop: Sheddings is empty (nil runs them all)")
	case c.Throttlings != nil && len(c.Throttlings) == 0:
		return errors.New("closedloop: Throttlings is empty (nil runs both)")
	}
	for i, s := range c.Sheddings {
		switch {
		case s != NoShedding && s != FixedShedding && s != AdaptiveShedding:
			return fmt.Errorf("closedloop: Sheddings: unknown shedding %q, want none, fixed or adaptive", s)
		case slices.Contains(c.Sheddings[:i], s):
			return fmt.Errorf("closedloop: Sheddings: %q is given twice", s)
		}
	}
	for i, t := range c.Throttlings {
		if slices.Contains(c.Throttlings[:i], t) {
			return fmt.Errorf("closedloop: Throttlings: %s is given twice", benchrun.OnOff(t))
		}
	}
	return nil
}

// Capacity is the server's capacity in calls per second.
func (c Config) Capacity() float64 {
	c = c.withDefaults()
	return float64(c.Workers) / c.Service.D().Seconds()
}

// Row is one combination's result.
type Row struct {
	Shedding   Shedding     `json:"shedding"`
	Throttling bool         `json:"throttling"`
	Report     *load.Report `json:"report"`
	// Goodput is successful calls per second as a share of the capacity.
	Goodput float64 `json:"goodput"`
	// Busy, Refused (in the client) and OtherFailed are shares of calls.
	Busy        float64 `json:"busy"`
	Refused     float64 `json:"refused"`
	OtherFailed float64 `json:"other_failed"`
	// Reached counts the requests that reached the server; Handled those
	// that ran the handler.
	Reached int64  `json:"reached"`
	Handled int64  `json:"handled"`
	GCs     uint32 `json:"gcs"`
	// Aware is nil unless rows are paired: false when the calls carry no
	// class and the server's limits are ShedConfig.FirstComeFirstServed,
	// true when they carry their class and the limits admit higher
	// classes first and share themselves between callers.
	Aware *bool `json:"aware,omitzero"`
	// Classes and Callers hold the figures per class and per caller, in a
	// paired row (empty without a Mix or Callers).
	Classes []Figures       `json:"classes,omitzero"`
	Callers []CallerFigures `json:"callers,omitzero"`
}

// Result is a whole comparison.
type Result struct {
	Config   Config       `json:"config"`
	Unloaded *load.Report `json:"unloaded"`
	Rows     []Row        `json:"rows"`
}

// Run runs the unloaded run, then each combination (twice when paired).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	defer benchrun.SetGCPercent(cfg.GCPercent)()
	res := &Result{Config: cfg}
	cfg.Progress("unloaded: a quarter of the capacity, no shedding")
	base := cfg
	base.Mix, base.Callers, base.HeavyFactor = nil, 0, 0
	unloaded, err := runOne(ctx, base, NoShedding, false, false, 0.25)
	if err != nil {
		return nil, err
	}
	res.Unloaded = unloaded.Report
	sheddings, throttlings, awareness := cfg.Sheddings, cfg.Throttlings, []bool{false}
	if sheddings == nil {
		sheddings = []Shedding{NoShedding, FixedShedding, AdaptiveShedding}
	}
	if throttlings == nil {
		throttlings = []bool{false, true}
	}
	if cfg.paired() {
		awareness = []bool{false, true}
	}
	for _, s := range sheddings {
		for _, throttling := range throttlings {
			for _, aware := range awareness {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				what := fmt.Sprintf("shedding %s, client busy throttling %s", s, benchrun.OnOff(throttling))
				if cfg.paired() {
					what += ", " + awareNames[aware][0]
				}
				cfg.Progress(what)
				row, err := runOne(ctx, cfg, s, throttling, aware, cfg.Load)
				if err != nil {
					return nil, err
				}
				res.Rows = append(res.Rows, row)
			}
		}
	}
	return res, nil
}

// awareNames name a paired row's shedding, unaware and aware: in
// Progress, and in the table's "shedding knows" column.
var awareNames = map[bool][2]string{
	false: {"unaware (first come, first served)", "nothing (FCFS)"},
	true:  {"aware of classes and callers", "classes, callers"},
}

// runOne runs one combination at load times the capacity; serverOpts go
// to the server's Channel.
func runOne(ctx context.Context, cfg Config, s Shedding, throttling, aware bool, loadFactor float64, serverOpts ...channel.Option) (Row, error) {
	paired := cfg.paired()
	scfg := load.ServerConfig{Service: "closedloop", Method: "work", Shape: load.Fixed(cfg.Service.D()), Workers: cfg.Workers, Options: serverOpts}
	switch s {
	case FixedShedding:
		scfg.Shed = &channel.ShedConfig{MaxInFlight: cfg.FixedLimit}
	case AdaptiveShedding:
		scfg.Shed = &channel.ShedConfig{Adaptive: &shed.Config{}}
	}
	if scfg.Shed != nil && paired {
		scfg.Shed.FirstComeFirstServed = !aware
	}
	servers, err := load.StartServers(1, scfg)
	if err != nil {
		return Row{}, err
	}
	defer servers.Close()
	clients := make([]*channel.Client, max(cfg.Callers, 1))
	for k := range clients {
		name := "closedloop-client"
		if cfg.Callers > 0 {
			name = callerName(k)
		}
		ch, client, err := load.NewClient(name, "closedloop", servers.HostPorts(),
			channel.WithBusyConfig(busy.Config{Disabled: !throttling}), channel.WithRetries(channel.RetryConfig{Disabled: true}))
		if err != nil {
			return Row{}, err
		}
		defer ch.Close()
		clients[k] = client
	}
	rps := loadFactor * cfg.Capacity()
	// Warm up: connect every client and let an adaptive limit's first
	// probe finish.
	for i := 0; i < max(shed.DefaultProbeSamples+5, len(clients)) && ctx.Err() == nil; i++ {
		wctx, cancel := context.WithTimeout(ctx, cfg.Timeout.D())
		_, _ = clients[i%len(clients)].Call(wctx, "work", &channel.Request{Format: "raw"})
		cancel()
	}
	lc := load.Config{
		Method: "work", RPS: rps, Duration: cfg.Duration.D(),
		Concurrency: min(load.MaxConcurrency, int(rps*cfg.Timeout.D().Seconds())+cfg.Workers+100),
		Timeout:     cfg.Timeout.D(), Timeline: true,
	}
	var p *plan
	if paired {
		p = newPlan(cfg)
		lc.Record = true
		if cfg.Callers > 0 {
			lc.Client = p.callerOf
		}
		if aware && len(cfg.Mix) > 0 {
			lc.Context = func(ctx context.Context, i int) context.Context {
				return criticality.WithClass(ctx, cfg.Mix[p.classOf(i)].Class)
			}
		}
	}
	before := servers.Received()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs := ms.NumGC
	rep, err := load.RunClients(ctx, clients, lc)
	if err != nil {
		return Row{}, err
	}
	runtime.ReadMemStats(&ms)
	gcs = ms.NumGC - gcs
	if rep.Calls == 0 {
		return Row{}, errors.New("closedloop: no call was made")
	}
	n := float64(rep.Calls)
	busyN := rep.Errors["BUSY"]
	row := Row{
		Shedding: s, Throttling: throttling, Report: rep,
		Goodput: float64(rep.OK) / cfg.Duration.D().Seconds() / cfg.Capacity(),
		Busy:    float64(busyN) / n, Refused: float64(rep.Refused) / n,
		OtherFailed: float64(rep.Failed-busyN) / n,
		Reached:     int64(rep.Sent),
		Handled:     servers.Received() - before,
		GCs:         gcs,
	}
	if paired {
		row.Aware = &aware
		row.Classes, row.Callers = p.figures(cfg, rep.Records, cfg.Duration.D().Seconds())
		rep.Records = nil
	}
	return row, nil
}

// WriteTable writes r as Markdown tables.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	_, err := fmt.Fprintf(w, "Server: %d workers x %v (capacity C = %.0f calls/s); offered %.1f x C = %.0f calls/s for %v, open loop, no retries, %v timeout; GOGC %s.\n",
		c.Workers, c.Service, c.Capacity(), c.Load, c.Load*c.Capacity(), c.Duration, c.Timeout, benchrun.GOGC(c.GCPercent))
	if err != nil {
		return err
	}
	if len(c.Mix) > 0 {
		parts := make([]string, len(c.Mix))
		for i, sh := range c.Mix {
			parts[i] = fmt.Sprintf("%v %v%%", sh.Class, sh.Percent)
		}
		fmt.Fprintf(w, "Classes of the offered calls: %s.\n", strings.Join(parts, ", "))
	}
	if c.Callers > 0 {
		fmt.Fprintf(w, "Callers: %d, caller-1 to caller-%d, each a client of its own; caller-1 (heavy) offers %vx each other's rate.\n", c.Callers, c.Callers, c.HeavyFactor)
	}
	if c.paired() {
		fmt.Fprintln(w, "Each combination runs twice: unaware (the calls carry no class; the server's limits are first come, first served) and aware (the calls carry their class; the server's limits admit higher classes first and share themselves between callers).")
	}
	u := r.Unloaded
	fmt.Fprintf(w, "Unloaded (%.0f calls/s, no shedding): p50 %v, p99 %v.\n\n", 0.25*c.Capacity(), u.Latency.P50, u.Latency.P99)
	ratio := func(d load.Millis) float64 {
		if u.Latency.P99 <= 0 {
			return 0
		}
		return float64(d) / float64(u.Latency.P99)
	}
	combo := func(row Row) string {
		s := fmt.Sprintf("| %s | %s |", row.Shedding, benchrun.OnOff(row.Throttling))
		if row.Aware != nil {
			s += fmt.Sprintf(" %s |", awareNames[*row.Aware][1])
		}
		return s
	}
	head, rule := "| server shedding | client throttling |", "|---|---|"
	if c.paired() {
		head, rule = head+" shedding knows |", rule+"---|"
	}
	fmt.Fprintln(w, head+" goodput (of C) | Busy | refused in client | other failures | p50 ok | p99 ok | p99 / unloaded | reached the server /s | ran the handler /s | GCs /s |")
	fmt.Fprintln(w, rule+"---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range r.Rows {
		rep := row.Report
		secs := c.Duration.D().Seconds()
		fmt.Fprintf(w, "%s %.1f%% | %.1f%% | %.1f%% | %.1f%% | %v | %v | %.1fx | %.0f | %.0f | %.1f |\n",
			combo(row), 100*row.Goodput, 100*row.Busy, 100*row.Refused, 100*row.OtherFailed,
			rep.Latency.P50, rep.Latency.P99, ratio(rep.Latency.P99), float64(row.Reached)/secs, float64(row.Handled)/secs, float64(row.GCs)/secs)
	}
	groups := func(title, what string, figures func(Row) []Figures) {
		fmt.Fprintf(w, "\n%s\n\n%s %s | offered /s | ok /s | served | p99 ok | p99 / unloaded |\n%s---|---:|---:|---:|---:|---:|\n", title, head, what, rule)
		for _, row := range r.Rows {
			for _, f := range figures(row) {
				fmt.Fprintf(w, "%s %s | %.0f | %.0f | %.2f%% | %v | %.1fx |\n", combo(row), f.Name, f.OfferedRPS, f.OKRPS, 100*f.Served, f.P99, ratio(f.P99))
			}
		}
	}
	if len(c.Mix) > 0 {
		groups("By class (served: ok of offered, calls refused in the client included):", "class", func(row Row) []Figures { return row.Classes })
	}
	if c.Callers > 0 {
		groups("By caller (served: ok of offered, calls refused in the client included):", "caller", func(row Row) []Figures {
			fs := make([]Figures, len(row.Callers))
			for i, cf := range row.Callers {
				if fs[i] = cf.Figures; cf.Heavy {
					fs[i].Name += " (heavy)"
				}
			}
			return fs
		})
	}
	return nil
}
