package ratesim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-rpc/sluice/internal/ratelimit"
	"github.com/sluice-rpc/sluice/pacing"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/sim/event"
)

// epoch is the virtual time every run starts at.
var epoch = time.Date(2020, 7, 8, 0, 0, 0, 0, time.UTC)

// Scenario is one simulated workload: greedy clients (each sends its next
// request as soon as its pacer lets it) against one Server.
type Scenario struct {
	// Clients is the number of clients, each with its own pacer.
	Clients int `json:"clients"`
	// Capacity is the server's bucket (4500).
	Capacity int64 `json:"capacity"`
	// Window is the time the bucket takes to refill completely (an hour);
	// 0 means it never refills.
	Window millis.Duration `json:"window_ms"`
	// Start is the number of requests in the bucket at time 0.
	Start int64 `json:"start"`
	// Latency is each request's round trip: the server sees the request when
	// it is sent and the client gets the answer Latency later.
	Latency millis.Duration `json:"latency_ms"`
	// Duration ends the run: no request is sent after it. A run with
	// StopRemaining >= 0 also ends when every client has stopped.
	Duration millis.Duration `json:"duration_ms"`
	// StopRemaining >= 0 stops each client at its first response whose
	// RateLimit-Remaining is at or below it; -1 never stops a client early.
	StopRemaining int64 `json:"stop_remaining"`
	// InitialSleep is the pacers' starting sleep (Config.InitialSleep).
	InitialSleep millis.Duration `json:"initial_sleep_ms"`
}

// Steady is Heroku's main run: 10 greedy clients for 30 minutes against a
// bucket of 4500 refilled at 4500 per hour, starting empty as the article's
// harness does (its GCRA server's starting_limit is 0).
func Steady() Scenario {
	return Scenario{Clients: 10, Capacity: 4500, Window: millis.Duration(time.Hour), Start: 0,
		Latency: millis.Duration(DefaultLatency), Duration: millis.Duration(30 * time.Minute), StopRemaining: -1}
}

// Clear is Heroku's "time to clear workload" run: a full bucket of 4500
// that is not refilled, clients starting at 1 s of sleep, each done at its
// first response with 10 or fewer requests remaining. Duration is a safety
// bound (the article's slowest strategy takes about 9 minutes).
func Clear() Scenario {
	return Scenario{Clients: 10, Capacity: 4500, Window: 0, Start: 4500,
		Latency: millis.Duration(DefaultLatency), Duration: millis.Duration(6 * time.Hour), StopRemaining: 10,
		InitialSleep: millis.Duration(time.Second)}
}

// DefaultLatency is the simulated round trip of one request. Heroku's
// article does not state it; 165 ms is what makes exponential backoff clear
// 4500 requests with 10 clients in the article's 74 s (449 sequential
// requests per client), and it is of the order of a request to Heroku's
// API.
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

// Point is one step of a client's sleep over time: from At (since the
// start of the run) the pacer's sleep was Sleep.
type Point struct {
	At    time.Duration
	Sleep time.Duration
}

// Client is one client's tally.
type Client struct {
	// Requests counts requests sent, retries included.
	Requests int64
	// RateLimited counts rate-limited responses.
	RateLimited int64
	// MaxSleep is the longest single sleep, jitter included.
	MaxSleep time.Duration
	// Done is when the client stopped (StopRemaining), or 0 if it did not.
	Done time.Duration
	// Series is the pacer's sleep over time, one point per change.
	Series []Point
}

// Result is the outcome of one run.
type Result struct {
	// Clients holds each client's tally.
	Clients []Client
	// End is when the run ended: when the last client stopped, or Duration.
	End time.Duration
	// Stopped reports that every client stopped before Duration.
	Stopped bool
	// HeaderErrors counts responses whose headers ParseHeaders rejected
	// (always 0 against this server; kept as the channel's metric is).
	HeaderErrors int64
}

// RetryRate is Heroku's "average retry rate": the mean over clients of
// rate-limited responses / requests.
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

// RequestStdev is the population standard deviation of the clients'
// request counts.
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

// NewPacer makes client i's pacer; rnd is that client's own random source,
// derived from the run's seed.
type NewPacer func(i int, rnd *rand.Rand) (ratelimit.Pacer, error)

// ForConfig returns a NewPacer making ratelimit.New(c) with the scenario's
// initial sleep and the client's random source.
func ForConfig(c pacing.Config, s Scenario) NewPacer {
	return func(_ int, rnd *rand.Rand) (ratelimit.Pacer, error) {
		c.InitialSleep = s.InitialSleep.D()
		c.Rand = rnd.Float64
		return ratelimit.New(c)
	}
}

// event kinds: a client sends a request, or receives its answer.
const (
	evSend = iota
	evReceive
)

// clientEvent is a client's next send, or the answer it receives.
type clientEvent struct {
	client int
	kind   int
	ok     bool
	hdr    map[string]string
}

// Run plays s in virtual time with one pacer per client, made by newPacer
// with a random source derived from seed. It is deterministic: the same
// scenario, pacers and seed give the same result. Nothing sleeps; a
// 30-minute run takes milliseconds.
func Run(s Scenario, newPacer NewPacer, seed uint64) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	if newPacer == nil {
		return Result{}, errors.New("ratesim: newPacer is nil")
	}
	pacers := make([]ratelimit.Pacer, s.Clients)
	res := Result{Clients: make([]Client, s.Clients)}
	var q event.Queue[clientEvent]
	for i := range pacers {
		p, err := newPacer(i, rand.New(rand.NewPCG(seed, uint64(i))))
		if err != nil {
			return Result{}, err
		}
		pacers[i] = p
		res.Clients[i].Series = []Point{{0, p.Sleep()}}
	}
	srv := NewServer(s.Capacity, s.Start, s.Window.D(), epoch)
	end := epoch.Add(s.Duration.D())
	note := func(i int, now time.Time, slept time.Duration) {
		c := &res.Clients[i]
		c.MaxSleep = max(c.MaxSleep, slept)
		if sl := pacers[i].Sleep(); sl != c.Series[len(c.Series)-1].Sleep {
			c.Series = append(c.Series, Point{now.Sub(epoch), sl})
		}
	}
	for i, p := range pacers {
		d := p.Before(epoch)
		note(i, epoch, d)
		q.Push(epoch.Add(d), clientEvent{client: i, kind: evSend})
	}
	stopped := 0
	last := epoch
	for {
		now, e, more := q.Pop()
		if !more {
			break
		}
		i := e.client
		switch e.kind {
		case evSend:
			if !now.Before(end) {
				continue // the run is over; this request is never sent
			}
			ok, hdr := srv.Handle(now)
			res.Clients[i].Requests++
			q.Push(now.Add(s.Latency.D()), clientEvent{client: i, kind: evReceive, ok: ok, hdr: hdr})
		case evReceive:
			last = now
			sig, err := ratelimit.ParseHeaders(e.hdr, now)
			if err != nil {
				res.HeaderErrors++
			}
			var wait time.Duration
			if e.ok {
				pacers[i].OnSuccess(now, sig)
			} else {
				res.Clients[i].RateLimited++
				wait = pacers[i].OnRateLimited(now, sig)
			}
			if s.StopRemaining >= 0 && sig.Has(pacing.FieldRemaining) && sig.Remaining <= s.StopRemaining {
				res.Clients[i].Done = now.Sub(epoch)
				note(i, now, 0)
				if stopped++; stopped == s.Clients {
					res.End, res.Stopped = now.Sub(epoch), true
					return res, nil
				}
				continue
			}
			if e.ok {
				wait = pacers[i].Before(now)
			}
			note(i, now, wait)
			q.Push(now.Add(wait), clientEvent{client: i, kind: evSend})
		}
	}
	res.End = min(last.Sub(epoch), s.Duration.D())
	if s.StopRemaining < 0 {
		res.End = s.Duration.D()
	}
	return res, nil
}
