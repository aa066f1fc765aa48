package deploy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/tools/internal/etcdserver"
)

// Run runs cfg's rows one after the other and returns their results. It
// stops at the first row that cannot run, or when ctx ends, and returns
// the rows done so far with the error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	res := &Result{Config: cfg}
	endpoint := cfg.EtcdEndpoint
	if slices.Contains(cfg.Rows, RowEtcd) {
		if endpoint == "" {
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

// runRow runs one row: the fleet, the clients, the load, the warmup, the
// steady stretch, then the replacements, each followed by the settle.
func runRow(ctx context.Context, cfg Config, row Row, etcdEndpoint string) (_ RowResult, err error) {
	f, err := startFleet(cfg, row, etcdEndpoint)
	if err != nil {
		return RowResult{}, err
	}
	defer func() {
		if cerr := f.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cs, err := startClients(cfg, f)
	if err != nil {
		return RowResult{}, err
	}
	defer cs.close()

	start := time.Now()
	g := startLoad(cfg.Rate, cfg.Timeout.D(), cs.callers)
	var reps []replacement
	steadyFrom := start.Add(cfg.Warmup.D())
	settles := settleSchedule(cfg)
	err = func() error {
		if err := clock.Sleep(ctx, clock.Real, (cfg.Warmup + cfg.Steady).D()); err != nil {
			return err
		}
		for k := range cfg.Replacements {
			i := k % len(f.live)
			rep, err := f.replace(i)
			if err != nil {
				return fmt.Errorf("replacement %d of %d: %w", k+1, cfg.Replacements, err)
			}
			reps = append(reps, rep)
			cfg.progress("  replaced %s with %s (%d of %d): the old one left in %v",
				rep.old.Addr(), rep.new.Addr(), k+1, cfg.Replacements, rep.left.Sub(rep.leaveFrom).Round(time.Millisecond))
			if err := clock.Sleep(ctx, clock.Real, settles[k]); err != nil {
				return err
			}
		}
		return nil
	}()
	calls := g.finish()
	end := time.Now()
	if err != nil {
		return RowResult{}, err
	}
	// The clients close first, so that the servers' Close has no
	// connection to wait for; the servers then report what they handled.
	cs.close()
	if err := f.close(); err != nil {
		return RowResult{}, err
	}
	r := summarize(row, calls, reps, f.all, start, steadyFrom, end)
	cfg.progress("  %d calls, %d failed", r.Calls, r.Failed)
	return r, nil
}

// settleSeed seeds the settles' lengths: every row draws the same ones.
const settleSeed = 20_260_817

// settleSchedule returns the length of each settle: Settle times a factor
// drawn uniformly from [0.75, 1.25], the same sequence in every row, so
// that the replacements do not fall into step with the DNS clients'
// lookups (a fixed settle made each removal land at the same point of
// their period).
func settleSchedule(cfg Config) []time.Duration {
	rng := rand.New(rand.NewPCG(settleSeed, 0))
	s := make([]time.Duration, cfg.Replacements)
	for i := range s {
		s[i] = time.Duration(float64(cfg.Settle) * (0.75 + 0.5*rng.Float64()))
	}
	return s
}

// stopAll stops instances at once and waits for them.
func stopAll(ins []*instance) error {
	errs := make([]error, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = in.stop()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
