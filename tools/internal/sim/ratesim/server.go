package ratesim

import (
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

// Server is the simulated API server: a GCRA rate limiter over a bucket of
// Capacity requests that refills at Capacity per Window (Heroku's 4500 per
// hour), or not at all. It answers every request with a RateLimit-Remaining
// header and refuses requests when the bucket is empty.
//
// GCRA keeps one time, the theoretical arrival time (TAT) of the next
// request at the sustained rate; the bucket holds Capacity - (TAT-now)/T
// requests, where T = Window/Capacity is the emission interval. A request
// is allowed when at least one whole request is left, and then moves TAT
// one interval on. Time is virtual: the caller passes it in.
type Server struct {
	capacity int64
	interval time.Duration // T; 0 means no refill
	tat      time.Time     // refilling mode
	left     int64         // non-refilling mode
}

// NewServer returns a server whose bucket holds start requests (clamped to
// [0, capacity]) at time now, refilled at capacity per window, or never when
// window is 0.
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
	ahead := s.tat.Sub(now)
	if ahead < 0 {
		ahead = 0
	}
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
		s.tat = later(s.tat, now).Add(s.interval)
		ok = true
	}
	return ok, map[string]string{pacing.HeaderRemaining: strconv.FormatInt(s.Remaining(now), 10)}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
