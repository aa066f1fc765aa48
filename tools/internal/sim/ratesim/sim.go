// Package ratesim replays the simulation of Heroku's client rate
// throttling article ("A Fast Car Needs Good Brakes") in virtual time: a
// GCRA server (4500 requests refilled at 4500 per hour, answering with
// RateLimit-Remaining) and greedy clients, each paced by the pacer the
// channel runs. Compare measures the article's four metrics for every
// pacer beside its published figures, for "sluice-lab sim ratelimit".
package ratesim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/internal/ratelimit"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/event"
)

// epoch is the virtual time every run starts at.
var epoch = time.Date(2020, 7, 8, 0, 0, 0, 0, time.UTC)

// Scenario is one simulated workload: greedy clients, each sending as
// soon as its pacer lets it, against one Server.
type Scenario struct {
	Clients int `json:"clients"`
	// Capacity is the server's bucket, refilled in Window (0: never) and
	// holding Start requests at time 0.
	Capacity int64           `json:"capacity"`
	Window   millis.Duration `json:"window_ms"`
	Start    int64           `json:"start"`
	// Latency is each request's round trip; the server sees it at once.
	Latency millis.Duration `json:"latency_ms"`
	// Duration ends the run, or every client stopping, if they do.
	Duration millis.Duration `json:"duration_ms"`
	// StopRemaining >= 0 stops each client at its first response whose
	// RateLimit-Remaining is at or below it; -1 never.
	StopRemaining int64           `json:"stop_remaining"`
	InitialSleep  millis.Duration `json:"initial_sleep_ms"`
}

// Steady is Heroku's main run: 10 clients for 30 minutes against a bucket
// of 4500 refilled at 4500 per hour, starting empty as the article's does.
func Steady() Scenario {
	return Scenario{Clients: 10, Capacity: 4500, Window: millis.Duration(time.Hour), Start: 0,
		Latency: millis.Duration(DefaultLatency), Duration: millis.Duration(30 * time.Minute), StopRemaining: -1}
}

// Clear is Heroku's "time to clear workload" run: Steady's clients on a
// full bucket of 4500, not refilled, starting at 1 s of sleep and done at
// 10 or fewer remaining.
func Clear() Scenario {
	s := Steady()
	s.Window, s.Start, s.Duration = 0, 4500, millis.Duration(6*time.Hour)
	s.StopRemaining, s.InitialSleep = 10, millis.Duration(time.Second)
	return s
}

// DefaultLatency is a request's round trip, which the article does not
// state: 165 ms makes exponential backoff clear 4500 requests with 10
// clients in the article's 74 s.
const DefaultLatency = 165 * time.Millisecond

// Validate reports the first unusable field of s.
func (s Scenario) Validate() error {
	switch {
	case s.Clients < 1:
		return fmt.Errorf("ratesim: clients is %d, must be >= 1", s.Clients)
	case s.Capacity < 1:
		return fmt.Errorf("ratesim: capacity is %d, must be >= 1", s.Capacity)
	case s.Window < 0:
		return fmt.Errorf("ratesim: window is %v, must be >= 0", s.Window)
	case s.Latency <= 0:
		return fmt.Errorf("ratesim: latency is %v, must be > 0", s.Latency)
	case s.Duration <= 0:
		return fmt.Errorf("ratesim: duration is %v, must be > 0", s.Duration)
	case s.StopRemaining < -1:
		return fmt.Errorf("ratesim: stopRemaining is %d, must be >= -1", s.StopRemaining)
	}
	return nil
}

// Point is one step of a client's sleep: from At on it was Sleep.
type Point struct {
	At    time.Duration
	Sleep time.Duration
}

// Client is one client's tally.
type Client struct {
	Requests    int64 // retries included
	RateLimited int64
	MaxSleep    time.Duration // the longest single sleep
	// Done is when the client stopped (StopRemaining), or 0.
	Done time.Duration
	// Series is the pacer's sleep over time, one point per change.
	Series []Point
}

// Result is the outcome of one run.
type Result struct {
	Clients []Client
	// End is when the last client stopped, or Duration; Stopped reports
	// that every client stopped before Duration.
	End     time.Duration
	Stopped bool
	// HeaderErrors counts responses whose headers ParseHeaders rejected.
	HeaderErrors int64
}

// RetryRate is the mean over clients of rate-limited responses / requests.
func (r Result) RetryRate() float64 {
	var sum float64
	n := 0
	for _, c := range r.Clients {
		if c.Requests > 0 {
			sum += float64(c.RateLimited) / float64(c.Requests)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// MaxSleep is the longest sleep of any client.
func (r Result) MaxSleep() time.Duration {
	var m time.Duration
	for _, c := range r.Clients {
		m = max(m, c.MaxSleep)
	}
	return m
}

// RequestStdev is the standard deviation of the clients' request counts.
func (r Result) RequestStdev() float64 {
	n := float64(len(r.Clients))
	if n == 0 {
		return 0
	}
	var sum, sq float64
	for _, c := range r.Clients {
		sum += float64(c.Requests)
	}
	mean := sum / n
	for _, c := range r.Clients {
		d := float64(c.Requests) - mean
		sq += d * d
	}
	return math.Sqrt(sq / n)
}

// Requests is the total number of requests sent.
func (r Result) Requests() int64 {
	var n int64
	for _, c := range r.Clients {
		n += c.Requests
	}
	return n
}

// Successes is the total number of requests the server allowed.
func (r Result) Successes() int64 {
	var n int64
	for _, c := range r.Clients {
		n += c.Requests - c.RateLimited
	}
	return n
}

// Run plays s in virtual time with one pacer of configuration c per
// client, each with a random source derived from seed: the same inputs
// give the same result.
func Run(s Scenario, c pacing.Config, seed uint64) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	c.InitialSleep = s.InitialSleep.D()
	pacers := make([]ratelimit.Pacer, s.Clients)
	res := Result{Clients: make([]Client, s.Clients)}
	note := func(i int, now time.Time, slept time.Duration) {
		c := &res.Clients[i]
		c.MaxSleep = max(c.MaxSleep, slept)
		if sl := pacers[i].Sleep(); sl != c.Series[len(c.Series)-1].Sleep {
			c.Series = append(c.Series, Point{now.Sub(epoch), sl})
		}
	}
	srv := NewServer(s.Capacity, s.Start, s.Window.D(), epoch)
	end := epoch.Add(s.Duration.D())
	stopped := 0
	last := epoch
	// A client's events, each due at now: sending a request, and receiving
	// the answer a round trip later. Each client has at most one pending.
	var q event.Queue[func(now time.Time)]
	var send func(i int, now time.Time)
	receive := func(i int, now time.Time, ok bool, hdr map[string]string) {
		last = now
		sig, err := ratelimit.ParseHeaders(hdr, now)
		if err != nil {
			res.HeaderErrors++
		}
		var wait time.Duration
		if ok {
			pacers[i].OnSuccess(now, sig)
		} else {
			res.Clients[i].RateLimited++
			wait = pacers[i].OnRateLimited(now, sig)
		}
		if s.StopRemaining >= 0 && sig.Has(pacing.FieldRemaining) && sig.Remaining <= s.StopRemaining {
			res.Clients[i].Done = now.Sub(epoch)
			note(i, now, 0)
			stopped++
			return
		}
		if ok {
			wait = pacers[i].Before(now)
		}
		note(i, now, wait)
		q.Push(now.Add(wait), func(now time.Time) { send(i, now) })
	}
	send = func(i int, now time.Time) {
		if !now.Before(end) {
			return // the run is over
		}
		ok, hdr := srv.Handle(now)
		res.Clients[i].Requests++
		q.Push(now.Add(s.Latency.D()), func(now time.Time) { receive(i, now, ok, hdr) })
	}
	for i := range pacers {
		c.Rand = rand.New(rand.NewPCG(seed, uint64(i))).Float64
		p, err := ratelimit.New(c)
		if err != nil {
			return Result{}, err
		}
		pacers[i] = p
		res.Clients[i].Series = []Point{{0, p.Sleep()}}
		d := p.Before(epoch)
		note(i, epoch, d)
		q.Push(epoch.Add(d), func(now time.Time) { send(i, now) })
	}
	for now, handle, ok := q.Pop(); ok; now, handle, ok = q.Pop() {
		handle(now)
	}
	switch {
	case stopped == s.Clients:
		res.End, res.Stopped = last.Sub(epoch), true
	case s.StopRemaining < 0:
		res.End = s.Duration.D()
	default:
		res.End = min(last.Sub(epoch), s.Duration.D())
	}
	return res, nil
}

// Server is the simulated API server: a GCRA rate limiter over a bucket of
// capacity requests refilled at capacity per window, or not at all. It
// answers with a RateLimit-Remaining header. GCRA keeps the theoretical
// arrival time (TAT) of the next request: the bucket holds capacity -
// (TAT-now)/T requests, T = window/capacity.
type Server struct {
	capacity int64
	interval time.Duration // T; 0 means no refill
	tat      time.Time     // refilling mode
	left     int64         // non-refilling mode
}

// NewServer returns a server whose bucket holds start requests at now,
// refilled at capacity per window, or never when window is 0.
func NewServer(capacity, start int64, window time.Duration, now time.Time) *Server {
	start = min(max(start, 0), capacity)
	s := &Server{capacity: capacity}
	if window <= 0 || capacity <= 0 {
		s.left = start
		return s
	}
	s.interval = window / time.Duration(capacity)
	s.tat = now.Add(time.Duration(capacity-start) * s.interval)
	return s
}

// level returns the requests in the bucket at now, fractional.
func (s *Server) level(now time.Time) float64 {
	if s.interval == 0 {
		return float64(s.left)
	}
	ahead := max(s.tat.Sub(now), 0)
	return float64(s.capacity) - float64(ahead)/float64(s.interval)
}

// Remaining returns the whole requests left in the bucket at now.
func (s *Server) Remaining(now time.Time) int64 {
	return max(int64(s.level(now)), 0)
}

// Handle answers a request arriving at now: whether it was allowed, and the
// response headers (RateLimit-Remaining, after the request).
func (s *Server) Handle(now time.Time) (ok bool, headers map[string]string) {
	if s.interval == 0 {
		if s.left >= 1 {
			s.left--
			ok = true
		}
	} else if s.level(now) >= 1 {
		s.tat = s.tat.Add(max(now.Sub(s.tat), 0) + s.interval)
		ok = true
	}
	return ok, map[string]string{pacing.HeaderRemaining: strconv.FormatInt(s.Remaining(now), 10)}
}
