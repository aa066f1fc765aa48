package deploy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/tools/internal/etcdserver"
)

// Run runs cfg's rows one after the other. It stops at the first row that
// cannot run, or when ctx ends, returning the rows done so far.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	res := &Result{Config: cfg}
	endpoint := cfg.EtcdEndpoint
	if slices.Contains(cfg.Rows, RowEtcd) && endpoint == "" {
		dir, err := os.MkdirTemp("", "sluice-deploy-etcd-")
		if err != nil {
			return nil, fmt.Errorf("deploy: etcd's data directory: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.progress("starting etcd")
		s, err := etcdserver.Start(etcdserver.Config{Dir: dir, Binary: cfg.EtcdBinary, Embedded: cfg.EmbeddedEtcd})
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		defer s.Close()
		endpoint, res.Etcd = s.Endpoint, s.Kind
	}
	for _, row := range cfg.Rows {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		cfg.progress("row %s: %s", row, row.Title())
		r, err := runRow(ctx, cfg, row, endpoint)
		if err != nil {
			return res, fmt.Errorf("deploy: row %s: %w", row, err)
		}
		res.Rows = append(res.Rows, r)
	}
	return res, nil
}

// runRow runs one row: the fleet, the clients, the load, the warmup and
// steady stretch, then the replacements, each followed by a settle.
func runRow(ctx context.Context, cfg Config, row Row, etcdEndpoint string) (_ RowResult, err error) {
	f, err := startServers(cfg, row, etcdEndpoint)
	if err != nil {
		return RowResult{}, err
	}
	defer func() {
		if cerr := f.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	callers, clients, err := startClients(cfg, f)
	if err != nil {
		return RowResult{}, err
	}
	defer clients.Close()

	start := time.Now()
	finish := startLoad(cfg.Rate, cfg.Timeout.D(), callers)
	var reps []replacement
	settles := settleSchedule(cfg)
	err = clock.Sleep(ctx, clock.Real, (cfg.Warmup + cfg.Steady).D())
	for k := 0; k < cfg.Replacements && err == nil; k++ {
		var rep replacement
		if rep, err = f.replace(k % len(f.live)); err != nil {
			err = fmt.Errorf("replacement %d of %d: %w", k+1, cfg.Replacements, err)
			break
		}
		reps = append(reps, rep)
		cfg.progress("  replaced %s with %s (%d of %d): the old one left in %v",
			rep.old.addr, rep.new.addr, k+1, cfg.Replacements, rep.left.Sub(rep.leaveFrom).Round(time.Millisecond))
		err = clock.Sleep(ctx, clock.Real, settles[k])
	}
	calls, hung := finish()
	end := time.Now()
	if err != nil {
		return RowResult{}, err
	}
	// The clients close first, so that the servers' Close waits for no
	// connection; the servers then report what they handled.
	clients.Close()
	if err := f.close(); err != nil {
		return RowResult{}, err
	}
	r := summarize(row, calls, hung, reps, f.all, start, start.Add(cfg.Warmup.D()), end)
	cfg.progress("  %d calls, %d failed", r.Calls, r.Failed)
	return r, nil
}

// settleSeed seeds the settles' lengths: every row draws the same ones.
const settleSeed = 20_260_817

// settleSchedule returns each settle's length: Settle times a factor
// drawn from [0.75, 1.25], the same in every row, so that the replacements
// do not fall into step with the DNS clients' lookups.
func settleSchedule(cfg Config) []time.Duration {
	rng := rand.New(rand.NewPCG(settleSeed, 0))
	s := make([]time.Duration, cfg.Replacements)
	for i := range s {
		s[i] = time.Duration(float64(cfg.Settle) * (0.75 + 0.5*rng.Float64()))
	}
	return s
}
