// Package shedsim simulates, in virtual time, a server guarded by the real
// adaptive limit (internal/shedlimit's Limiter, configured by a
// shed.Config). Requests arrive as a Poisson process; refused ones are not
// retried. The server is a Pool (N workers behind a first-come queue) or a
// CPU (K cores shared equally by the requests in flight); either way its
// capacity is N / service time, and Steps may change the service time.
// Runs are deterministic for a seed.
package shedsim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/shedlimit"
	"github.com/sluice-rpc/sluice/shed"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/event"
)

// epoch is the virtual time every run starts at.
var epoch = time.Date(2020, 7, 8, 0, 0, 0, 0, time.UTC)

// Model is the simulated server.
type Model string

// The models.
const (
	Pool Model = "pool"
	CPU  Model = "cpu"
)

// Guard is what stands in front of the server.
type Guard string

// The guards.
const (
	Adaptive Guard = "adaptive" // the adaptive limit of Scenario.Shed
	Fixed    Guard = "fixed"    // a fixed limit of Scenario.FixedLimit
	None     Guard = "none"     // every request admitted
)

// Step changes the service time at a moment of the run.
type Step struct {
	At      millis.Duration `json:"at_ms"`
	Service millis.Duration `json:"service_ms"`
}

// Scenario is one simulated run.
type Scenario struct {
	Model   Model
	Workers int // N for Pool, K (cores) for CPU
	// Service is the service time at the start; Steps change it later.
	Service time.Duration
	Steps   []Step
	// Load is the offered rate as a multiple of the starting capacity.
	Load     float64
	Duration time.Duration
	Guard    Guard
	// FixedLimit is the Fixed guard's limit; Shed the Adaptive guard's
	// configuration.
	FixedLimit int
	Shed       shed.Config
	Seed       uint64
}

// MaxRequests bounds a run's work: Load * capacity * Duration.
const MaxRequests = 50_000_000

// Validate reports the first field that is out of range.
func (s Scenario) Validate() error {
	switch {
	case s.Model != Pool && s.Model != CPU:
		return fmt.Errorf("shedsim: model is %q, want pool or cpu", s.Model)
	case s.Workers < 1 || s.Workers > 100_000:
		return fmt.Errorf("shedsim: workers is %d, must be between 1 and 100000", s.Workers)
	case s.Service <= 0:
		return fmt.Errorf("shedsim: service time is %v, must be > 0", s.Service)
	case !(s.Load > 0) || math.IsInf(s.Load, 0):
		return fmt.Errorf("shedsim: load is %v, must be a finite number > 0", s.Load)
	case s.Duration < time.Second || s.Duration > 24*time.Hour:
		return fmt.Errorf("shedsim: duration is %v, must be between 1s and 24h", s.Duration)
	case s.Guard != Adaptive && s.Guard != Fixed && s.Guard != None:
		return fmt.Errorf("shedsim: guard is %q, want adaptive, fixed or none", s.Guard)
	case s.Guard == Fixed && s.FixedLimit < 1:
		return fmt.Errorf("shedsim: fixed limit is %d, must be >= 1", s.FixedLimit)
	}
	if s.Guard == Adaptive {
		if err := s.Shed.Validate(); err != nil {
			return err
		}
	}
	for i, st := range s.Steps {
		if st.Service <= 0 {
			return fmt.Errorf("shedsim: step %d: service time is %v, must be > 0", i+1, st.Service)
		}
		if st.At < 0 || st.At.D() > s.Duration || (i > 0 && st.At < s.Steps[i-1].At) {
			return fmt.Errorf("shedsim: step %d: at %v, must be within the run and after the step before", i+1, st.At)
		}
	}
	if n := s.Load * s.Capacity() * s.Duration.Seconds(); n > MaxRequests {
		return fmt.Errorf("shedsim: the run would offer %.0f requests, more than %d; shorten it or lower the load", n, MaxRequests)
	}
	return nil
}

// Capacity is the requests per second served at the starting service time.
func (s Scenario) Capacity() float64 { return float64(s.Workers) / s.Service.Seconds() }

// Second is what happened in one simulated second.
type Second struct {
	// T is the second's end; Service the service time then.
	T       time.Duration
	Service time.Duration
	// Offered, Admitted and Shed count requests arriving in the second.
	Offered, Admitted, Shed int
	// Done counts requests finishing; Goodput is Done over the capacity
	// at the second's service time.
	Done    int
	Goodput float64
	// P50 and P99 are the latencies of the requests finishing.
	P50, P99 time.Duration
	// Limit is the estimate at the second's end (the fixed limit, or 0);
	// MinLimit and MaxLimit its extremes in the second.
	Limit, MinLimit, MaxLimit float64
	NoLoad                    time.Duration // the limiter's no-load latency
	InFlight                  int           // admitted and not finished
}

// Result is a run's seconds.
type Result struct {
	Scenario Scenario
	Seconds  []Second
}

// request is an admitted request in the server.
type request struct {
	arrived time.Time
	tok     shedlimit.Token
	work    float64 // CPU: the virtual work at which it finishes
}

// Run simulates s.
func Run(s Scenario) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	r := &run{s: s, rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x5eed)), service: s.Service}
	if s.Guard != None {
		cfg := s.Shed
		if s.Guard == Fixed {
			cfg = shed.Config{MinLimit: s.FixedLimit, MaxLimit: s.FixedLimit}
		}
		cfg.Clock = clock.NewFake(epoch)
		var err error
		if r.lim, err = shedlimit.New(cfg); err != nil {
			return Result{}, err
		}
	}
	return r.run(), nil
}

type run struct {
	s       Scenario
	rng     *rand.Rand
	lim     *shedlimit.Limiter
	service time.Duration
	now     time.Time

	// Pool: requests waiting for a worker, and those being served.
	queue   []*request
	serving event.Queue[*request]
	// CPU: requests by the virtual work at which they finish, and the
	// work each in-flight request has received so far.
	cpu     cpuHeap
	virtual float64

	sec       Second
	latencies []time.Duration
}

func (r *run) run() Result {
	res := Result{Scenario: r.s}
	rate := r.s.Load * r.s.Capacity()
	end := epoch.Add(r.s.Duration)
	r.now = epoch
	nextArrival := epoch.Add(r.expo(rate))
	nextSecond := epoch.Add(time.Second)
	steps := r.s.Steps
	r.resetSecond()
	for {
		next := nextArrival
		if f, ok := r.nextFinish(); ok && f.Before(next) {
			next = f
		}
		if len(steps) > 0 && epoch.Add(steps[0].At.D()).Before(next) {
			next = epoch.Add(steps[0].At.D())
		}
		if !nextSecond.After(next) {
			r.advance(nextSecond)
			res.Seconds = append(res.Seconds, r.closeSecond())
			if !nextSecond.Before(end) {
				return res
			}
			nextSecond = nextSecond.Add(time.Second)
			continue
		}
		r.advance(next)
		switch {
		case len(steps) > 0 && next.Equal(epoch.Add(steps[0].At.D())):
			r.service = steps[0].Service.D()
			steps = steps[1:]
		case next.Equal(nextArrival):
			r.arrive()
			nextArrival = next.Add(r.expo(rate))
		default:
			r.finishOne()
		}
	}
}

// expo returns an exponentially distributed gap for rate per second.
func (r *run) expo(rate float64) time.Duration {
	return max(time.Duration(r.rng.ExpFloat64()/rate*float64(time.Second)), 1)
}

// cpuRate is the share of a core each in-flight request gets.
func (r *run) cpuRate() float64 {
	return min(1, float64(r.s.Workers)/float64(len(r.cpu)))
}

// advance moves the clock to t, progressing CPU work.
func (r *run) advance(t time.Time) {
	if len(r.cpu) > 0 {
		r.virtual += t.Sub(r.now).Seconds() * r.cpuRate()
	}
	r.now = t
}

func (r *run) nextFinish() (time.Time, bool) {
	if r.s.Model == Pool {
		return r.serving.Next()
	}
	if len(r.cpu) == 0 {
		return time.Time{}, false
	}
	left := math.Max(0, r.cpu[0].work-r.virtual)
	return r.now.Add(time.Duration(math.Ceil(left / r.cpuRate() * float64(time.Second)))), true
}

func (r *run) arrive() {
	r.sec.Offered++
	req := &request{arrived: r.now}
	if r.lim != nil {
		tok, ok := r.lim.AcquireAt(r.now)
		if !ok {
			r.sec.Shed++
			return
		}
		req.tok = tok
	}
	r.sec.Admitted++
	if r.s.Model == CPU {
		req.work = r.virtual + r.service.Seconds()
		heap.Push(&r.cpu, req)
		return
	}
	if r.serving.Len() < r.s.Workers {
		r.serving.Push(r.now.Add(r.service), req)
		return
	}
	r.queue = append(r.queue, req)
}

func (r *run) finishOne() {
	var req *request
	if r.s.Model == CPU {
		req = heap.Pop(&r.cpu).(*request)
	} else {
		_, req, _ = r.serving.Pop()
		if len(r.queue) > 0 {
			next := r.queue[0]
			r.queue[0] = nil
			r.queue = r.queue[1:]
			r.serving.Push(r.now.Add(r.service), next)
		}
	}
	if r.lim != nil {
		r.lim.ReleaseAt(req.tok, r.now)
	}
	if r.s.Guard == Adaptive {
		e := r.lim.State().Estimate
		r.sec.MinLimit, r.sec.MaxLimit = min(r.sec.MinLimit, e), max(r.sec.MaxLimit, e)
	}
	r.sec.Done++
	r.latencies = append(r.latencies, r.now.Sub(req.arrived))
}

func (r *run) estimate() float64 {
	switch r.s.Guard {
	case Adaptive:
		return r.lim.State().Estimate
	case Fixed:
		return float64(r.s.FixedLimit)
	}
	return 0
}

func (r *run) resetSecond() {
	e := r.estimate()
	r.sec = Second{MinLimit: e, MaxLimit: e}
	r.latencies = r.latencies[:0]
}

func (r *run) closeSecond() Second {
	s := r.sec
	s.T = r.now.Sub(epoch)
	s.Service = r.service
	s.Goodput = float64(s.Done) / (float64(r.s.Workers) / r.service.Seconds())
	if n := len(r.latencies); n > 0 {
		slices.Sort(r.latencies)
		s.P50 = r.latencies[(n-1)/2]
		s.P99 = r.latencies[(n*99+99)/100-1]
	}
	s.Limit = r.estimate()
	if r.lim != nil {
		s.NoLoad = r.lim.State().NoLoadLatency
	}
	s.InFlight = len(r.cpu) + len(r.queue) + r.serving.Len() // CPU holds only cpu, Pool the others
	r.resetSecond()
	return s
}

// cpuHeap orders CPU requests by the virtual work at which they finish.
type cpuHeap []*request

func (h cpuHeap) Len() int           { return len(h) }
func (h cpuHeap) Less(i, j int) bool { return h[i].work < h[j].work }
func (h cpuHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cpuHeap) Push(x any)        { *h = append(*h, x.(*request)) }
func (h *cpuHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}
