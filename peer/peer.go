package peer

import (
	"errors"
	"time"

	"github.com/sluice-rpc/sluice/internal/hostport"
)

// Errors of a call that found no peer to take it: nothing was sent.
// A Channel's calls return them (channel.ErrThrottled and its siblings
// are these values), so errors.Is finds them.
var (
	// ErrThrottled: every Ready peer's busy limiter refused the request
	// after busy responses. Back off, or let the limit recover (within a
	// second or so).
	ErrThrottled = errors.New("every peer is throttled after busy responses; nothing was sent")
	// ErrNoPeers: the service has no peers. Add one first.
	ErrNoPeers = errors.New("no peers for the service; add a peer first")
	// ErrUnavailable: no peer has a connection, and none is being made:
	// every one is in TransientFailure (refused, reset, handshake failed or
	// timed out, found dead, or its server said it is leaving) and waits
	// out its connection backoff, or is shut down.
	ErrUnavailable = errors.New("no peer could take the call: their connections failed (refused, reset, closed or found dead) or their servers are shutting down, and they are waiting to reconnect; nothing was sent")
)

// ErrPeerLeaving is the cause of the connection failure of a peer whose
// server said it is shutting down (a Sluice server's Shutdown or Close,
// through the signal carrier): the peer is in TransientFailure, so calls
// go to other peers, and is connected to again on the connection backoff,
// in case a new server takes its address. An UNAVAILABLE error whose
// peers left so wraps it.
var ErrPeerLeaving = errors.New("the server is shutting down (it said so): calls go to other peers")

// Counts are a peer's totals since it was added.
type Counts struct {
	HostPort  string
	Sent      uint64        // attempts sent
	Busy      uint64        // busy responses received
	Throttled uint64        // requests its limiter refused
	Pending   int64         // attempts awaiting a response, counted from their choice
	Limit     float64       // busy limit in force now, requests per second
	Latency   time.Duration // latency estimate (0 until a call succeeds)
	State     State         // connection state
	Weight    float64       // weight, as discovery or SetPeers gave it
	// Effective is the weight the chooser uses now: Weight times the
	// slow-start factor while the peer ramps up.
	Effective float64
	Ejections uint64    // times the peer was ejected
	Ejected   time.Time // when its ejection ends; zero when not ejected
	// Slow reports that the peer's latency stands far above the others':
	// it takes only an occasional probe.
	Slow bool
}

// ValidateHostPort checks that hostPort is host:port with a numeric port in
// 1..65535 and a host that is an IP address or a DNS host name (such as
// localhost). It rejects spaces, an empty host, and a dotted-decimal host
// that is not an IPv4 address ("999.999.999.999").
func ValidateHostPort(hostPort string) error { return hostport.Validate(hostPort) }
