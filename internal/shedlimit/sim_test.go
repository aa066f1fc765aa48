package shedlimit

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/shed"
)

// A simulated server: workers handlers, each taking service per request,
// behind a Limiter, fed by Poisson sources on a fake clock. It drives the
// very AcquireForAt and ReleaseAt a server runs; a refused request is
// lost (no retries, no client throttling: the harshest case for the
// shedder, which has to refuse all of the excess itself).
type simSource struct {
	class  criticality.Class
	caller string
	rps    float64
}

type simResult struct {
	offered, served int
	lat             []time.Duration
}

func (r *simResult) fraction() float64 { return float64(r.served) / float64(r.offered) }

func (r *simResult) p99() time.Duration {
	slices.Sort(r.lat)
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[len(r.lat)*99/100]
}

type simDone struct {
	at  time.Duration
	tok Token
	src int
	lat time.Duration
}

type doneHeap []simDone

func (h doneHeap) Len() int           { return len(h) }
func (h doneHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h doneHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *doneHeap) Push(x any)        { *h = append(*h, x.(simDone)) }
func (h *doneHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate runs srcs for d against l, a server of workers taking service
// per request, and returns each source's result over the time after warm.
func simulate(l *Limiter, srcs []simSource, workers int, service, warm, d time.Duration) []simResult {
	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]time.Duration, len(srcs))
	gap := func(i int) time.Duration {
		return time.Duration(rng.ExpFloat64() / srcs[i].rps * float64(time.Second))
	}
	for i := range srcs {
		next[i] = gap(i)
	}
	free := make([]time.Duration, workers) // when each worker is next free
	res := make([]simResult, len(srcs))
	var done doneHeap
	for {
		src, at := -1, d
		for i, t := range next {
			if t < at {
				src, at = i, t
			}
		}
		for len(done) > 0 && done[0].at <= at {
			e := heap.Pop(&done).(simDone)
			l.ReleaseAt(e.tok, t0.Add(e.at))
			if e.lat >= 0 {
				res[e.src].served++
				res[e.src].lat = append(res[e.src].lat, e.lat)
			}
		}
		if src < 0 {
			return res
		}
		next[src] += gap(src)
		if simTrace != nil {
			simTrace(at)
		}
		counted := at >= warm
		if counted {
			res[src].offered++
		}
		tok, ok := l.AcquireForAt(t0.Add(at), srcs[src].class, srcs[src].caller)
		if !ok {
			continue
		}
		w := 0
		for i := range free {
			if free[i] < free[w] {
				w = i
			}
		}
		start := max(at, free[w])
		free[w] = start + service
		e := simDone{at: start + service, tok: tok, src: src, lat: start + service - at}
		if !counted {
			e.lat = -1 // arrived before warm: released, not counted
		}
		heap.Push(&done, e)
	}
}

var simTrace func(time.Duration)

// simServer: 8 workers of 2 ms, a capacity of 4,000 requests per second.
const (
	simWorkers = 8
	simService = 2 * time.Millisecond
	simCap     = float64(simWorkers) * float64(time.Second) / float64(simService)
)

func simLimiter(t *testing.T, fixed int) *Limiter {
	t.Helper()
	cfg := shed.Config{Clock: clock.NewFake(t0)}
	if fixed > 0 {
		cfg.MinLimit, cfg.MaxLimit = fixed, fixed
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mix returns sources of one caller offering load times the capacity
// shared between classes by percent.
func mix(load float64, shares map[criticality.Class]float64) []simSource {
	var srcs []simSource
	for _, c := range []criticality.Class{criticality.CriticalPlus, criticality.Critical, criticality.SheddablePlus, criticality.Sheddable} {
		if p := shares[c]; p > 0 {
			srcs = append(srcs, simSource{class: c, caller: "caller", rps: load * simCap * p / 100})
		}
	}
	return srcs
}

func servedOK(res []simResult) float64 {
	var n int
	for _, r := range res {
		n += r.served
	}
	return float64(n)
}

// TestSimClassesAt3x: at three times capacity, critical_plus 20%,
// critical 30%, sheddable 50%, with no retries: critical_plus is served
// in full and fast, the server stays busy, and the classes are served in
// their order with sheddable nearly shut out. For the adaptive limit and
// for a fixed one.
func TestSimClassesAt3x(t *testing.T) {
	for _, fixed := range []int{0, 16} {
		t.Run(fmt.Sprintf("fixed=%d", fixed), func(t *testing.T) {
			l := simLimiter(t, fixed)
			srcs := mix(3, map[criticality.Class]float64{criticality.CriticalPlus: 20, criticality.Critical: 30, criticality.Sheddable: 50})
			const warm, d = 2 * time.Second, 12 * time.Second
			res := simulate(l, srcs, simWorkers, simService, warm, d)
			cp, c, s := &res[0], &res[1], &res[2]
			t.Logf("served: critical_plus %.4f (p99 %v), critical %.4f, sheddable %.4f; goodput %.3f of capacity; level %v",
				cp.fraction(), cp.p99(), c.fraction(), s.fraction(), servedOK(res)/(simCap*(d-warm).Seconds()), l.Level())
			if got := cp.fraction(); got < 0.995 {
				t.Errorf("critical_plus served: got %.4f, want >= 0.995", got)
			}
			if got := cp.p99(); got > 3*simService {
				t.Errorf("critical_plus p99: got %v, want <= %v", got, 3*simService)
			}
			if got := servedOK(res) / (simCap * (d - warm).Seconds()); got < 0.95 {
				t.Errorf("goodput: got %.3f of capacity, want >= 0.95", got)
			}
			if !(cp.fraction() >= c.fraction() && c.fraction() >= s.fraction()) {
				t.Errorf("served fractions not ordered: critical_plus %.4f, critical %.4f, sheddable %.4f", cp.fraction(), c.fraction(), s.fraction())
			}
			if got := s.fraction(); got > 0.05 {
				t.Errorf("sheddable served: got %.4f, want <= 0.05", got)
			}
			if got := l.Refusing(); got != criticality.SheddablePlus {
				t.Errorf("Refusing: got %v, want %v (critical, the boundary, is not refused wholesale)", got, criticality.SheddablePlus)
			}
		})
	}
}

// TestSimCriticalPlusAt4x: sheddable at 3.6 times capacity beside
// critical_plus at 0.4: critical_plus is served in full and fast.
func TestSimCriticalPlusAt4x(t *testing.T) {
	for _, fixed := range []int{0, 16} {
		t.Run(fmt.Sprintf("fixed=%d", fixed), func(t *testing.T) {
			l := simLimiter(t, fixed)
			srcs := mix(4, map[criticality.Class]float64{criticality.CriticalPlus: 10, criticality.Sheddable: 90})
			const warm, d = 2 * time.Second, 12 * time.Second
			res := simulate(l, srcs, simWorkers, simService, warm, d)
			cp, s := &res[0], &res[1]
			t.Logf("served: critical_plus %.4f (p99 %v), sheddable %.4f; goodput %.3f of capacity",
				cp.fraction(), cp.p99(), s.fraction(), servedOK(res)/(simCap*(d-warm).Seconds()))
			if got := cp.fraction(); got < 0.995 {
				t.Errorf("critical_plus served: got %.4f, want >= 0.995", got)
			}
			if got := cp.p99(); got > 3*simService {
				t.Errorf("critical_plus p99: got %v, want <= %v", got, 3*simService)
			}
		})
	}
}

// TestSimHeavyCaller: at 1.5 times capacity, ten callers of one class,
// caller-1 offering ten times each other's rate: the nine others are
// served in full and fast, and the heavy one still gets a tenth of the
// capacity.
func TestSimHeavyCaller(t *testing.T) {
	for _, fixed := range []int{0, 16} {
		t.Run(fmt.Sprintf("fixed=%d", fixed), func(t *testing.T) {
			l := simLimiter(t, fixed)
			unit := 1.5 * simCap / 19
			srcs := []simSource{{class: criticality.Critical, caller: "caller-1", rps: 10 * unit}}
			for i := 2; i <= 10; i++ {
				srcs = append(srcs, simSource{class: criticality.Critical, caller: fmt.Sprintf("caller-%d", i), rps: unit})
			}
			const warm, d = 2 * time.Second, 12 * time.Second
			res := simulate(l, srcs, simWorkers, simService, warm, d)
			heavy := float64(res[0].served) / (d - warm).Seconds()
			t.Logf("heavy: %.0f rps (%.3f of capacity)", heavy, heavy/simCap)
			for i := 1; i < len(res); i++ {
				r := &res[i]
				t.Logf("%s: served %.4f, p99 %v", srcs[i].caller, r.fraction(), r.p99())
				if got := r.fraction(); got < 0.95 {
					t.Errorf("%s served: got %.4f, want >= 0.95", srcs[i].caller, got)
				}
				if got := r.p99(); got > 3*simService {
					t.Errorf("%s p99: got %v, want <= %v", srcs[i].caller, got, 3*simService)
				}
			}
			if heavy < simCap/10 {
				t.Errorf("heavy caller: got %.0f rps, want >= %.0f (a tenth of capacity)", heavy, simCap/10)
			}
		})
	}
}
