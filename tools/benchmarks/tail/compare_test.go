package tail

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/sluice-rpc/sluice/tools/benchmarks/load"
)

// Config describes a comparison; a zero field takes its default.
type Config struct {
	// Servers is how many embedded servers there are (hedges go to
	// distinct ones). Default 4.
	Servers int
	// Shape is the servers' latency (default load.HeavyTail()), their
	// random sources seeded from Seed (default 1).
	Shape *load.Shape
	Seed  uint64
	// Each run is Calls arrivals (default 4000) at RPS (default 400/s),
	// at most Concurrency in flight (default 200), after Warmup calls
	// (default 200).
	RPS         float64
	Calls       int
	Concurrency int
	Warmup      int
	// MaxAttempts is the hedging policies' maxAttempts. Default 3.
	MaxAttempts int
	// Quantile, Window and Budget configure adaptive hedging. Defaults
	// 0.95, 1000 and 0.1.
	Quantile float64
	Window   int
	Budget   float64
	// FixedDelay is the fixed hedging delay; 0 means the unhedged run's
	// p95, measured first.
	FixedDelay time.Duration
}

func def[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

func (c Config) withDefaults() Config {
	def(&c.Servers, 4)
	def(&c.Calls, 4000)
	def(&c.Concurrency, 200)
	def(&c.MaxAttempts, 3)
	def(&c.Window, 1000)
	def(&c.Warmup, 200)
	if c.Shape == nil {
		s := load.HeavyTail()
		c.Shape = &s
	}
	def(&c.Seed, 1)
	def(&c.RPS, 400)
	def(&c.Quantile, 0.95)
	def(&c.Budget, 0.1)
	return c
}

// Row is one run of the comparison: "no hedging", "fixed delay" or
// "adaptive", its hedging policy ("-" for none), and its measurement.
type Row struct {
	Name   string
	Policy string
	Report *load.Report
}

// Mode is one way of running the load.
type Mode int

// The three ways Compare runs the load.
const (
	NoHedging Mode = iota
	FixedDelay
	Adaptive
)

const service, method = "tail", "get"

// Compare starts cfg.Servers heavy-tailed servers and runs the same load
// against them three ways, each through a fresh client: without hedging,
// hedging after a fixed delay (the unhedged p95 unless cfg.FixedDelay is
// set), and adaptive hedging. It returns the rows in that order.
func Compare(ctx context.Context, cfg Config) ([]Row, error) {
	cfg = cfg.withDefaults()
	servers, err := load.StartServers(cfg.Servers, load.ServerConfig{Service: service, Method: method,
		Shape: *cfg.Shape, Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	defer servers.Close()
	var rows []Row
	for _, m := range []Mode{NoHedging, FixedDelay, Adaptive} {
		if m == FixedDelay && cfg.FixedDelay == 0 {
			cfg.FixedDelay = time.Duration(rows[0].Report.Latency.P95)
		}
		row, err := RunMode(ctx, servers.HostPorts(), cfg, m)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// RunMode runs cfg's load against the servers at hostPorts in mode m through
// a fresh client. FixedDelay needs cfg.FixedDelay > 0.
func RunMode(ctx context.Context, hostPorts []string, cfg Config, m Mode) (Row, error) {
	cfg = cfg.withDefaults()
	row, sc, err := policy(cfg, m)
	if err != nil {
		return Row{}, err
	}
	var opts []channel.Option
	if sc != nil {
		opts = append(opts, channel.WithServiceConfig(sc))
	}
	ch, client, err := load.NewClient("tail-client", service, hostPorts, opts...)
	if err != nil {
		return Row{}, err
	}
	defer ch.Close()
	// Hedges go to distinct ready peers: measure with every connection in
	// place, not a start-up in which the first peer to connect takes them.
	if err := client.Connect(ctx); err != nil {
		return Row{}, err
	}
	row.Report, err = load.Run(ctx, client, load.Config{Method: method, RPS: cfg.RPS,
		Calls: cfg.Calls, Concurrency: cfg.Concurrency, Warmup: cfg.Warmup})
	return row, err
}

func policy(cfg Config, m Mode) (Row, *serviceconfig.Config, error) {
	p := &hedge.Policy{MaxAttempts: cfg.MaxAttempts, NonFatalCodes: codes.NewSet(codes.Busy)}
	var row Row
	switch m {
	case NoHedging:
		return Row{Name: "no hedging", Policy: "-"}, nil, nil
	case FixedDelay:
		if cfg.FixedDelay <= 0 {
			return Row{}, nil, fmt.Errorf("tail: the fixed delay is %v, must be > 0", cfg.FixedDelay)
		}
		p.HedgingDelay = cfg.FixedDelay
		row = Row{Name: "fixed delay", Policy: fmt.Sprintf("maxAttempts %d, hedgingDelay %v", cfg.MaxAttempts, load.Millis(cfg.FixedDelay))}
	case Adaptive:
		p.Adaptive = &hedge.Adaptive{Quantile: cfg.Quantile, Window: cfg.Window, Floor: time.Millisecond,
			Cap: 500 * time.Millisecond, Budget: cfg.Budget}
		row = Row{Name: "adaptive", Policy: fmt.Sprintf("maxAttempts %d, delay p%g of last %d, budget %g%%",
			cfg.MaxAttempts, cfg.Quantile*100, cfg.Window, cfg.Budget*100)}
	default:
		return Row{}, nil, fmt.Errorf("tail: unknown mode %d", m)
	}
	sc, err := serviceconfig.New([]serviceconfig.MethodConfig{{
		Names: []serviceconfig.Name{{Service: service, Method: method}}, Hedge: p}}, nil)
	return row, sc, err
}

// WriteTable writes rows as a Markdown table, with each row's p99 and p99.9
// reduction relative to the first row, its failed calls, and its late calls
// (started over 1 ms behind schedule: a sign the client was starved of CPU
// and the latencies measure the machine more than the servers).
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| run | policy | p50 | p99 | p99.9 | extra requests | p99 cut | p99.9 cut | errors | late |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		q := r.Report.Latency
		cut := func(base, v load.Millis) string {
			if v <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1fx", float64(base)/float64(v))
		}
		b := rows[0].Report.Latency
		fmt.Fprintf(w, "| %s | %s | %v | %v | %v | %.1f%% | %s | %s | %d | %d |\n", r.Name, r.Policy,
			q.P50, q.P99, q.P999, r.Report.ExtraPercent, cut(b.P99, q.P99), cut(b.P999, q.P999),
			r.Report.Calls-r.Report.OK, r.Report.Late)
	}
}
