package pool

import (
	"math"
	"sync"
	"time"

	"github.com/sluice-rpc/sluice/internal/config"
)

// Defaults of ConnectBudget.
const (
	// DefaultConnectBurst is how many connects a Pool starts at once
	// before DefaultConnectRate applies: a fleet of 2,500 peers added at
	// once connects without waiting, one of 3,000 within 5 s.
	DefaultConnectBurst = 2500
	// DefaultConnectRate is how many connects a second a Pool starts,
	// across all its peers, once its burst is spent. A refused connect
	// costs about 300 us of CPU, most of it in waking the process, so
	// 10,000 unreachable peers retrying on their backoffs cost at most
	// 2,000 connects per 20 s (under 1 s of CPU), not one connect per
	// peer per backoff step (60,000 in their first 20 s).
	DefaultConnectRate = 100
)

// ConnectBudget bounds the connects a Pool starts across all its peers:
// a token bucket holding Burst connects, refilled at Rate a second. Each
// peer's backoff bounds its own reconnects; the budget bounds their sum,
// so that thousands of peers failing together (a registry naming
// thousands of unreachable addresses, a fleet restarting at once) cannot
// turn into a storm of dials.
//
// A connect a call is waiting for is never delayed: an Idle peer a call
// chose, or a Ready peer whose connection a call found closing. It is
// counted, so the others wait for it. The others, a peer's first connect
// when it joins a list and every reconnect on the backoff's schedule or
// after the remote closed a connection, take the budget's next turn in the
// order they ask: a peer in TransientFailure stays there until its turn
// comes (calls fail fast rather than wait for it), a joining one is
// Connecting meanwhile.
//
// The zero value means DefaultConnectRate and DefaultConnectBurst.
type ConnectBudget struct {
	// Rate is the connects a second once the burst is spent, 0 or at
	// least 0.001; 0 means DefaultConnectRate.
	Rate float64
	// Burst is how many connects may start at once, >= 0; 0 means
	// DefaultConnectBurst.
	Burst int
	// Disabled means no budget: each peer's backoff is the only bound.
	// Rate and Burst must then be 0.
	Disabled bool
}

// Validate reports the first rule b breaks, as a *retry.FieldError, or nil.
func (b ConnectBudget) Validate() error {
	switch {
	case !(b.Rate == 0 || b.Rate >= 0.001) || math.IsInf(b.Rate, 0):
		return config.Errorf("channel", "ConnectBudget.Rate", b.Rate, "must be 0 or a finite number >= 0.001 connects a second (0 means the default, %d; Disabled means no budget)", DefaultConnectRate)
	case b.Burst < 0:
		return config.Errorf("channel", "ConnectBudget.Burst", b.Burst, "must be >= 0 (0 means the default, %d)", DefaultConnectBurst)
	case b.Disabled && (b.Rate != 0 || b.Burst != 0):
		return config.Errorf("channel", "ConnectBudget.Disabled", true, "must have Rate and Burst 0")
	}
	return nil
}

func (b ConnectBudget) withDefaults() ConnectBudget {
	if b.Rate == 0 {
		b.Rate = DefaultConnectRate
	}
	if b.Burst == 0 {
		b.Burst = DefaultConnectBurst
	}
	return b
}

// connectBudget is ConnectBudget's bucket, kept as the time at which it
// would be full again (a virtual scheduling time, as in GCRA): a connect
// asked for at now may start at max(now, full - (Burst-1)/Rate), and
// moves full on by 1/Rate. Asking reserves the turn, so waiters are served
// in the order they asked, each woken once. nil is no budget.
type connectBudget struct {
	interval time.Duration // 1/Rate
	slack    time.Duration // (Burst-1) * interval: how far full may lead now with a connect still free

	mu   sync.Mutex
	full time.Time
}

func newConnectBudget(b ConnectBudget) *connectBudget {
	if b.Disabled {
		return nil
	}
	iv := max(time.Duration(float64(time.Second)/b.Rate), 1)
	return &connectBudget{interval: iv, slack: time.Duration(b.Burst-1) * iv}
}

// reserve counts a connect asked for at now and returns when it may
// start: now if the budget has a connect left or the connect is urgent (a
// call waits for it), else the budget's next free turn.
func (b *connectBudget) reserve(now time.Time, urgent bool) time.Time {
	if b == nil {
		return now
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	full := b.full
	if full.Before(now) {
		full = now
	}
	at := full.Add(-b.slack)
	if urgent || at.Before(now) {
		at = now
	}
	b.full = full.Add(b.interval)
	return at
}

// refund gives back a turn reserved but not used (the peer was removed
// while it waited).
func (b *connectBudget) refund(now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	if full := b.full.Add(-b.interval); full.After(now) {
		b.full = full
	} else {
		b.full = now
	}
	b.mu.Unlock()
}

// turnGrain is the grain of the times at which connectors waiting for the
// budget's turn wake: each waits until its turn rounded up to a multiple
// of it, so that the connectors whose turns fall within one grain wake
// together. A process woken for each connect alone spent about three
// times the connect's own CPU on waking (with 10,000 unreachable peers
// at 250 connects a second, 1.7 s of CPU per 20 s; 1.4 s on the grain).
const turnGrain = 20 * time.Millisecond

// onGrain returns t rounded up to a multiple of turnGrain since the Unix
// epoch.
func onGrain(t time.Time) time.Time {
	g := int64(turnGrain)
	ns := t.UnixNano()
	if r := ns % g; r != 0 {
		return t.Add(time.Duration(g - r))
	}
	return t
}
