package ratesim

import (
	"strconv"
	"time"

	"github.com/sluice-rpc/sluice/pacing"
)

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
