package closedloop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/sluice-rpc/sluice/busy"
	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
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
	// Workers and Service set the server's capacity, Workers / Service.
	// Defaults 8 and 2 ms (4,000 calls/s).
	Workers int
	Service time.Duration
	// Load is the offered rate as a multiple of the capacity. Default 2.
	Load float64
	// Duration is how long calls arrive in each run. Default 10 s.
	Duration time.Duration
	// Timeout is each call's deadline. Default 1 s.
	Timeout time.Duration
	// FixedLimit is fixed shedding's MaxInFlight. Default 2 x Workers.
	FixedLimit int
	// GCPercent is the garbage collector's target (as GOGC) while Run
	// runs; the process's own setting is restored after. The load
	// generator, the client and the server share this process and its
	// collector. At the default of 100 it ran 3-5 times a second in the
	// loaded rows, and while it marks it takes a share of the machine's
	// cores from the client and the server: on 2 cores those moments set
	// the p99 of every loaded row (11-19 ms, against 7-9 ms at 400 with
	// about one collection a second). In a deployment the client and the
	// server collect their own heaps, and a latency-sensitive service
	// tunes GOGC too. Default 400; a negative value keeps the process's
	// setting.
	GCPercent int
	// Progress, if not nil, is told when each run starts. It is not part
	// of a Result's JSON.
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
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.Service == 0 {
		c.Service = 2 * time.Millisecond
	}
	if c.Load == 0 {
		c.Load = 2
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	if c.FixedLimit == 0 {
		c.FixedLimit = 2 * c.Workers
	}
	if c.GCPercent == 0 {
		c.GCPercent = DefaultGCPercent
	}
	return c
}

// Validate reports the first field out of range (zero fields take their
// defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("closedloop: Workers is %d, must be in [1, %d]", c.Workers, MaxWorkers)
	case c.Service < 100*time.Microsecond || c.Service > time.Second:
		return fmt.Errorf("closedloop: Service is %v, must be in [100µs, 1s]", c.Service)
	case !(c.Load > 0 && c.Load <= 100):
		return fmt.Errorf("closedloop: Load is %v, must be in (0, 100]", c.Load)
	case c.Duration < time.Second || c.Duration > MaxDuration:
		return fmt.Errorf("closedloop: Duration is %v, must be in [1s, %v]", c.Duration, MaxDuration)
	case c.Timeout <= 0 || c.Timeout > load.MaxTimeout:
		return fmt.Errorf("closedloop: Timeout is %v, must be in (0, %v]", c.Timeout, load.MaxTimeout)
	case c.FixedLimit < 1:
		return fmt.Errorf("closedloop: FixedLimit is %d, must be >= 1", c.FixedLimit)
	}
	if rps := c.Capacity() * c.Load; rps > load.MaxRPS {
		return fmt.Errorf("closedloop: the offered rate would be %.0f calls/s, more than %d", rps, load.MaxRPS)
	}
	return nil
}

// Capacity is the server's capacity in calls per second.
func (c Config) Capacity() float64 {
	c = c.withDefaults()
	return float64(c.Workers) / c.Service.Seconds()
}

// Row is one combination's result.
type Row struct {
	Shedding   Shedding
	Throttling bool
	// Report is the load generator's report, with its timeline.
	Report *load.Report
	// Goodput is successful calls per second as a share of the capacity.
	Goodput float64
	// Busy, Refused and OtherFailed are shares of the calls: answered Busy,
	// refused in the client (busy throttling), failed otherwise.
	Busy, Refused, OtherFailed float64
	// Reached counts the requests that reached the server (sent by the
	// client, shed or not); Handled those that ran the handler.
	Reached, Handled int64
	// GCs counts the process's garbage collections during the run.
	GCs uint32
}

// Result is a whole comparison.
type Result struct {
	Config Config
	// Unloaded is the run at a quarter of the capacity with no shedding.
	Unloaded *load.Report
	Rows     []Row
}

// Run runs the comparison: the unloaded run, then the six combinations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	defer benchrun.SetGCPercent(cfg.GCPercent)()
	res := &Result{Config: cfg}
	cfg.progress("unloaded: a quarter of the capacity, no shedding")
	unloaded, err := runOne(ctx, cfg, NoShedding, false, 0.25)
	if err != nil {
		return nil, err
	}
	res.Unloaded = unloaded.Report
	for _, s := range []Shedding{NoShedding, FixedShedding, AdaptiveShedding} {
		for _, throttling := range []bool{false, true} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cfg.progress(fmt.Sprintf("shedding %s, client busy throttling %s", s, benchrun.OnOff(throttling)))
			row, err := runOne(ctx, cfg, s, throttling, cfg.Load)
			if err != nil {
				return nil, err
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

func (c Config) progress(s string) {
	if c.Progress != nil {
		c.Progress(s)
	}
}

// runOne runs one combination at load times the capacity.
func runOne(ctx context.Context, cfg Config, s Shedding, throttling bool, loadFactor float64) (Row, error) {
	scfg := load.ServerConfig{Service: "closedloop", Method: "work", Shape: load.Fixed(cfg.Service), Workers: cfg.Workers}
	switch s {
	case FixedShedding:
		scfg.Shed = &channel.ShedConfig{MaxInFlight: cfg.FixedLimit}
	case AdaptiveShedding:
		scfg.Shed = &channel.ShedConfig{Adaptive: &shed.Config{}}
	}
	servers, err := load.StartServers(1, scfg)
	if err != nil {
		return Row{}, err
	}
	defer servers.Close()
	ch, err := channel.New("closedloop-client", channel.WithBusyConfig(busy.Config{Disabled: !throttling}), channel.WithRetriesDisabled())
	if err != nil {
		return Row{}, err
	}
	defer ch.Close()
	client, err := ch.NewClient("closedloop")
	if err != nil {
		return Row{}, err
	}
	for _, hp := range servers.HostPorts() {
		if err := client.AddPeer(hp); err != nil {
			return Row{}, err
		}
	}
	rps := loadFactor * cfg.Capacity()
	// Warm up before counting what reaches the server: connect, and let
	// an adaptive limit's first probe (ProbeSamples requests) finish.
	for i := 0; i < shed.DefaultProbeSamples+5 && ctx.Err() == nil; i++ {
		wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		_, _ = client.Call(wctx, "work", &channel.Request{Format: "raw"})
		cancel()
	}
	before := servers.Received()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs := ms.NumGC
	rep, err := load.Run(ctx, client, load.Config{
		Method: "work", RPS: rps, Duration: cfg.Duration,
		Concurrency: min(load.MaxConcurrency, int(rps*cfg.Timeout.Seconds())+cfg.Workers+100),
		Timeout:     cfg.Timeout, Timeline: true,
	})
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
	return Row{
		Shedding: s, Throttling: throttling, Report: rep,
		Goodput: float64(rep.OK) / cfg.Duration.Seconds() / cfg.Capacity(),
		Busy:    float64(busyN) / n, Refused: float64(rep.Refused) / n,
		OtherFailed: float64(rep.Failed-busyN) / n,
		Reached:     int64(rep.Sent),
		Handled:     servers.Received() - before,
		GCs:         gcs,
	}, nil
}

// WriteTable writes r as a Markdown table.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	_, err := fmt.Fprintf(w, "Server: %d workers x %v (capacity C = %.0f calls/s); offered %.1f x C = %.0f calls/s for %v, open loop, no retries, %v timeout; GOGC %s.\n",
		c.Workers, c.Service, c.Capacity(), c.Load, c.Load*c.Capacity(), c.Duration, c.Timeout, benchrun.GOGC(c.GCPercent))
	if err != nil {
		return err
	}
	u := r.Unloaded
	fmt.Fprintf(w, "Unloaded (%.0f calls/s, no shedding): p50 %v, p99 %v.\n\n", 0.25*c.Capacity(), u.Latency.P50, u.Latency.P99)
	fmt.Fprintln(w, "| server shedding | client throttling | goodput (of C) | Busy | refused in client | other failures | p50 ok | p99 ok | p99 / unloaded | reached the server /s | ran the handler /s | GCs /s |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range r.Rows {
		rep := row.Report
		ratio := 0.0
		if u.Latency.P99 > 0 {
			ratio = float64(rep.Latency.P99) / float64(u.Latency.P99)
		}
		secs := c.Duration.Seconds()
		fmt.Fprintf(w, "| %s | %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %v | %v | %.1fx | %.0f | %.0f | %.1f |\n",
			row.Shedding, benchrun.OnOff(row.Throttling), 100*row.Goodput, 100*row.Busy, 100*row.Refused, 100*row.OtherFailed,
			rep.Latency.P50, rep.Latency.P99, ratio, float64(row.Reached)/secs, float64(row.Handled)/secs, float64(row.GCs)/secs)
	}
	return nil
}
