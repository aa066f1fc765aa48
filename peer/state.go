package peer

import "strconv"

// State is a peer's connection state. The states and their numbers are
// gRPC's subchannel connectivity states:
//
//	Idle --(the peer is added to a list, or a call looks at it)--> Connecting
//	Connecting --(handshake done)--> Ready
//	Connecting --(refused, reset, handshake failed or timed out)--> TransientFailure
//	Ready --(closed or reset by the remote after it served a while)--> Connecting
//	Ready --(found dead by health checks, or dropped soon after it opened)--> TransientFailure
//	Ready --(closed by this process's idle sweep)--> Idle
//	Ready --(its server asked the connection to drain: idle, at its cap)--> Idle
//	Ready --(its server said it is leaving)--> TransientFailure
//	Connecting --(the handshake said the server is leaving)--> TransientFailure
//	Ready --(an attempt found the connection closing: Peer.Lost)--> Connecting,
//	        then Ready again at once if the connection was fine
//	TransientFailure --(its backoff has passed, and the pool's connect budget gave it a turn)--> Connecting
//	any --(removed, or the channel closed)--> Shutdown
//
// Only a Ready peer is sent attempts.
type State uint8

const (
	// Idle: no connection, and none is being made: the connector was just
	// made, or its idle connection was closed. The next call that looks at
	// it starts a connect.
	Idle State = iota
	// Connecting: a dial and handshake are under way, or about to be: a
	// peer that just joined a list waits here for a turn of the pool's
	// connect budget (see ConnectBudget).
	Connecting
	// Ready: a connection is established; attempts go over it.
	Ready
	// TransientFailure: the last connect failed, the connection died, or
	// its server said it is leaving (Failure.Err is ErrPeerLeaving).
	// The next connect waits for the connection backoff.
	TransientFailure
	// Shutdown: the peer was removed or its channel closed.
	Shutdown
)

// String returns the state's name as gRPC spells it ("TRANSIENT_FAILURE").
func (s State) String() string {
	switch s {
	case Idle:
		return "IDLE"
	case Connecting:
		return "CONNECTING"
	case Ready:
		return "READY"
	case TransientFailure:
		return "TRANSIENT_FAILURE"
	case Shutdown:
		return "SHUTDOWN"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}
