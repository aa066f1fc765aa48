package channel

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/clock"
	"github.com/sluice-rpc/sluice/internal/latency"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
)

// deadlineRefusedWord marks, in a BUSY answer's message before its
// pushback hint, a request refused for its deadline, not for load: a
// Sluice client does not count it as the server's busy answer (it says
// nothing of the server's load), and the "do not retry" hint stops its
// retries and hedges.
const deadlineRefusedWord = " sluice-refused=deadline"

// isDeadlineRefusal reports whether a BUSY answer's message is a deadline
// refusal (deadlineRefusedWord).
func isDeadlineRefusal(msg string) bool { return strings.Contains(msg, deadlineRefusedWord) }

// ttlGuard is one method's deadline admission: the method's measured
// handler latency and the counter of its refusals.
type ttlGuard struct {
	method  string
	clk     clock.Clock // the Channel's
	est     latency.Low
	refused tally.Counter
}

// ttlGuardFor returns the deadline admission of a method, or nil when it
// is disabled (ShedConfig.NoDeadlineRefusals) or for health checks.
func (c *Channel) ttlGuardFor(method string) *ttlGuard {
	if c.o.noDeadlineRefusals || method == healthMethod {
		return nil
	}
	return &ttlGuard{method: method, clk: c.o.clock,
		refused: c.rec.Scope().Tagged(map[string]string{stats.TagReason: stats.ReasonDeadline}).Counter(stats.ServerRefused)}
}

// admit is the deadline admission of a request: it returns the time the
// request starts (zero when its latency is not measured) and true, or
// refuses the request (it answers it) and returns false. now is the
// clock's time if the guard read it (for the server metrics), or zero.
//
// The cost, where nothing was read before: during the cold start it reads
// the clock for every request, which done reads again. Then it reads it
// once per request to compare the time left, and done again for the 1 in
// ttlSampleMask+1 requests it measures, except for a method expected to
// take under ttlCheckFloor, which it does not check: only the requests it
// measures read the clock. With server metrics on, the guard reads the
// clock before and after every request, neither reads it again, and 1 in
// ttlSampleMaskTimed+1 requests is measured.
func (t *ttlGuard) admit(ctx context.Context, call *tchannel.InboundCall, now time.Time) (time.Time, bool) {
	if t == nil {
		return time.Time{}, true
	}
	exp, ok := t.est.Expected()
	if !ok {
		return t.now(now), true // the cold start: measure every request
	}
	mask := uint32(ttlSampleMask)
	if !now.IsZero() { // the server metrics time every request: measuring is one observation
		mask = ttlSampleMaskTimed
	}
	measure := rand.Uint32()&mask == 0
	if exp < ttlCheckFloor {
		if !measure {
			return time.Time{}, true
		}
		return t.now(now), true
	}
	start := t.now(now)
	if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(start); left < exp {
			t.refuse(call, left, exp)
			return time.Time{}, false
		}
	}
	if !measure {
		return time.Time{}, true
	}
	return start, true
}

// now returns now, or the clock's time if now is zero (not read).
func (t *ttlGuard) now(now time.Time) time.Time {
	if now.IsZero() {
		return t.clk.Now()
	}
	return now
}

// done measures the latency of a request admit started at start and
// answered at end (zero: not read), unless start is zero (not measured).
func (t *ttlGuard) done(start, end time.Time) {
	if t == nil || start.IsZero() {
		return
	}
	t.est.Observe(t.now(end).Sub(start))
}

// ttlSampleMask picks the requests whose handler latency is measured once
// a method's expected service time is known: 1 in ttlSampleMask+1, at
// random (math/rand/v2's generator is per thread: no shared counter);
// 1 in ttlSampleMaskTimed+1 when the server metrics read the clock before
// and after every request anyway. Until then every request is measured,
// so that the cold start ends after latency.MinSamples requests.
//
// The two clock reads of a measured request are most of the cost of
// deadline admission on a server far from its limits: against the same
// server measuring nothing, measuring 1 in 8 cost a raw echo server 0.5
// to 0.9 points of BenchmarkRawServerPaired's ratio, 1 in 64 0 to 0.5.
// At 1 in 64 the 64 latencies the estimate rests on are those of about
// the last 4,000 requests; as a low quantile (the 4th smallest), it falls
// within a few faster samples, and rises, which refuses more, only once
// nearly all of them are slower.
const (
	ttlSampleMask      = 63
	ttlSampleMaskTimed = 7
)

// ttlCheckFloor is the expected service time under which requests are
// not checked. A request comes with at least 1 ms: a TTL is whole
// milliseconds on the wire, and tchannel-go sends none under 1 ms. So
// one for a method expected to take under half of that is doomed only
// if it waited over half a millisecond between the arrival of its frame
// and its admission: an overload, which load shedding (ShedConfig)
// answers. Not checking such methods spares their requests a clock read.
const ttlCheckFloor = 500 * time.Microsecond

// refuse answers a request with left before its deadline, less than the
// method's expected service time: BUSY, "do not retry".
func (t *ttlGuard) refuse(call *tchannel.InboundCall, left, exp time.Duration) {
	t.refused.Inc(1)
	_ = call.Response().SendSystemError(BusyAfter(-1,
		"server refused: %v left before the deadline, under %v, the expected service time of %q (a low quantile of its handler's latency); the handler would not finish in time;"+deadlineRefusedWord,
		max(left, 0), exp, t.method))
}
