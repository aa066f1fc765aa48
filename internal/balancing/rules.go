package balancing

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/sluice-rpc/sluice/balance"
)

// SlowStart is a balance.SlowStart with the arithmetic of its ramp:
// convert one to call it (balancing.SlowStart(cfg.SlowStart).Factor(d)).
type SlowStart balance.SlowStart

// Ejection is a balance.Ejection with the arithmetic of outlier
// ejection: convert one to call it.
type Ejection balance.Ejection

func (s SlowStart) window() time.Duration {
	return cmp.Or(s.Window, balance.DefaultSlowStartWindow)
}

func (e Ejection) baseTime() time.Duration {
	return cmp.Or(e.BaseTime, balance.DefaultBaseEjectionTime)
}

func (e Ejection) maxTime() time.Duration {
	return cmp.Or(e.MaxTime, balance.DefaultMaxEjectionTime)
}

// Threshold returns how many UNEXPECTED or NETWORK answers in a row eject
// a peer.
func (e Ejection) Threshold() int {
	return cmp.Or(e.ConsecutiveErrors, balance.DefaultConsecutiveErrors)
}

// Factor returns the balance factor c of shard keys' bounded load
// (Config.BalanceFactor after its default).
func Factor(c balance.Config) float64 {
	return cmp.Or(c.BalanceFactor, balance.DefaultBalanceFactor)
}

// CheckWeight reports whether w is a weight a peer may have: 0 (meaning
// 1) or a number in [balance.MinWeight, balance.MaxWeight]; an error says
// why not.
func CheckWeight(w float64) error {
	if w == 0 || (w >= balance.MinWeight && w <= balance.MaxWeight) {
		return nil
	}
	return fmt.Errorf("weight %v, must be 0 (meaning 1) or a number in [%g, %g]", w, balance.MinWeight, balance.MaxWeight)
}

// Factor returns the multiplier of the weight of a peer that became ready
// elapsed ago, in [MinWeight, 1]: max(MinWeight, (elapsed / Window) ^
// (1 / Aggression)) within the window, 1 after it (and always 1 when
// slow start is disabled). A negative elapsed (a clock step back) counts
// as 0.
func (s SlowStart) Factor(elapsed time.Duration) float64 {
	w := s.window()
	if s.Disabled || elapsed >= w {
		return 1
	}
	minimum := cmp.Or(s.MinWeight, balance.DefaultMinWeight)
	if elapsed <= 0 {
		return minimum
	}
	f := float64(elapsed) / float64(w)
	if a := cmp.Or(s.Aggression, balance.DefaultAggression); a != 1 {
		f = math.Pow(f, 1/a)
	}
	return max(minimum, f)
}

// Ramping reports whether a peer ready for elapsed ramps up: it is still
// in its slow-start window, and became ready behind after the list's
// earliest ready peer, no less than a second (or a tenth of a shorter
// window) after it. Peers that become ready together, as when a client
// starts, take full shares at once: there is no fleet already serving
// for them to join gently.
func (s SlowStart) Ramping(elapsed, behind time.Duration) bool {
	w := s.window()
	return !s.Disabled && elapsed < w && behind >= min(time.Second, w/10)
}

// Duration returns the length of a peer's k-th ejection in a row (k >=
// 1): BaseTime x k, at most MaxTime.
func (e Ejection) Duration(k int) time.Duration {
	base, limit := e.baseTime(), e.maxTime()
	if k < 1 {
		k = 1
	}
	if int64(k) > int64(limit/base) {
		return limit
	}
	return min(base*time.Duration(k), limit)
}

// Multiplier returns k for a peer's next ejection, given the k of its
// last one (0 if none) and how long ago that one ended: one more than the
// last, less one for each whole BaseTime the peer has since served
// without being ejected. A peer that misbehaves again soon after its
// return stays out longer each time; one that behaved for a while starts
// over.
func (e Ejection) Multiplier(last int, sinceEnd time.Duration) int {
	if last <= 0 || sinceEnd < 0 {
		return max(last, 0) + 1
	}
	forgiven := int64(sinceEnd / e.baseTime())
	if forgiven >= int64(last) {
		return 1
	}
	return last - int(forgiven) + 1
}

// MaxEjected returns how many of n peers may be ejected at once:
// MaxPercent of n, rounded down, but at least 1.
func (e Ejection) MaxEjected(n int) int {
	p := cmp.Or(e.MaxPercent, balance.DefaultMaxEjectionPercent)
	return max(1, int(math.Floor(float64(n)*p/100+1e-9)))
}

// Panic reports whether a list of n peers, of which available are ready
// and not ejected, is below the panic threshold, where ejections are
// ignored.
func (e Ejection) Panic(available, n int) bool {
	t := cmp.Or(e.PanicThreshold, balance.DefaultPanicThreshold)
	return float64(available)*100 < t*float64(n)
}

// Capacity returns how many calls in flight a peer of weight w may have
// before a shard key's call spills past it: ceil(c x (inFlight + 1) x w /
// total), inFlight being the calls in flight to all the peers, total
// their weights' sum, and c the balance factor (Factor). With
// equal weights it is ceil(c x (m + 1) / n). The sum of the peers'
// capacities exceeds inFlight + 1, so some peer always has room.
func Capacity(c float64, inFlight int64, w, total float64) int64 {
	return int64(math.Ceil(c * float64(inFlight+1) * w / total))
}
