package channel

import (
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/pool"
)

// ConnectConfig says how a Channel connects to its peers (WithConnectConfig).
// Connections are made off the callers' path: a connector per host:port
// dials and handshakes with its own timeout, checks the connection's health
// and reconnects with backoff; a call only ever uses an established
// connection. The zero value means the defaults: a 5 s connect timeout,
// gRPC's connection backoff (1 s, x1.6, at most 120 s, +-20 % jitter), a
// health-check ping a second (three unanswered in half a second each close
// the connection) and a budget of 2,500 connects at once, then 100 a
// second.
type ConnectConfig struct {
	// Timeout bounds one connect: the TCP dial and the handshakes
	// (TChannel's, and TLS's with WithClientTLS). 0 means 5 s.
	Timeout time.Duration
	// Backoff spaces the connects to a peer after failures: after the
	// nth failure in a row the next connect starts Backoff.Delay(n) after
	// the failed one started. A connection that closes within
	// Backoff.Initial of its handshake counts as a failure too, so a peer
	// that accepts and drops connections is retried on this schedule, not
	// in a loop. Its Jitter must be backoff.ProportionalJitter (a Spread of
	// 0 means none). The zero value means gRPC's connection backoff:
	// Initial 1 s, Multiplier 1.6, Max 120 s, Spread 0.2.
	Backoff backoff.Exponential
	// HealthCheck finds a Ready connection whose peer stopped answering
	// without closing it (a frozen process, a dead link). The zero value
	// means a ping every second, the connection closed after three in a
	// row go unanswered for half a second (a silent peer is found in about
	// three seconds); HealthCheck{Disabled: true} turns it off.
	HealthCheck HealthCheck
	// Budget bounds the connects the Channel starts across all its peers.
	// The zero value means 100 a second after a burst of 2,500.
	Budget ConnectBudget
}

// HealthCheck is how a connector checks a Ready connection: a TChannel ping
// every Interval, and after Failures pings in a row unanswered within
// Timeout it closes the connection and the peer goes into TransientFailure.
// (tchannel-go has health checks of its own, ConnectionOptions.HealthChecks;
// a check of theirs that fails on a closing connection waits for itself
// forever, so Sluice runs its own.) The zero value means the default (a
// ping a second, three unanswered within half a second each close the
// connection); any other sets every field.
type HealthCheck struct {
	// Interval is the time between pings, > 0.
	Interval time.Duration
	// Timeout is how long a ping may go unanswered, > 0.
	Timeout time.Duration
	// Failures is how many pings in a row may go unanswered before the
	// connection is closed, >= 1.
	Failures int
	// Disabled turns health checks off; the other fields must then be 0.
	Disabled bool
}

// ConnectBudget bounds the connects a Channel starts across all its peers:
// a token bucket holding Burst connects, refilled at Rate a second. Each
// peer's backoff bounds its own reconnects; the budget bounds their sum,
// so that thousands of peers failing together (a registry naming
// thousands of unreachable addresses, a fleet restarting at once) cannot
// turn into a storm of dials.
//
// A connect a call is waiting for is never delayed: an Idle peer a call
// chose, or a Ready peer whose connection a call found closing. It is
// counted, so the others wait for it. The others, a peer's first connect
// when it joins and every reconnect on the backoff's schedule or after the
// remote closed a connection, take the budget's next turn in the order
// they ask: a peer in TransientFailure stays there until its turn comes
// (calls fail fast rather than wait for it), a joining one is Connecting
// meanwhile.
//
// The zero value means 100 connects a second after a burst of 2,500.
type ConnectBudget struct {
	// Rate is the connects a second once the burst is spent, 0 or at
	// least 0.001; 0 means 100.
	Rate float64
	// Burst is how many connects may start at once, >= 0; 0 means 2,500.
	Burst int
	// Disabled means no budget: each peer's backoff is the only bound.
	// Rate and Burst must then be 0.
	Disabled bool
}

// Validate reports the first rule c breaks, naming the field, or nil.
func (c ConnectConfig) Validate() error { return c.pool().Validate() }

// Validate reports the first rule b breaks, naming the field, or nil.
func (b ConnectBudget) Validate() error { return pool.ConnectBudget(b).Validate() }

// Validate reports the first rule h breaks, naming the field, or nil.
func (h HealthCheck) Validate() error { return pool.HealthCheck(h).Validate() }

// pool returns c as the connection pool takes it.
func (c ConnectConfig) pool() pool.ConnectConfig {
	return pool.ConnectConfig{Timeout: c.Timeout, Backoff: c.Backoff,
		HealthCheck: pool.HealthCheck(c.HealthCheck), Budget: pool.ConnectBudget(c.Budget)}
}
