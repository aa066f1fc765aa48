// Package codes names the outcomes of a TChannel call the way Sluice's
// policies, stats and errors spell them.
//
// The wire codes' numeric values are TChannel's system error codes, so such a
// Code converts to and from tchannel.SystemErrCode without a table; this
// package itself does not import TChannel, which keeps the policy packages
// free of it. The local codes name outcomes decided in the calling process,
// where nothing reached a server's handler; they never travel on the wire
// and a policy cannot name them.
package codes

import (
	"fmt"
	"strings"
)

// Code is a TChannel system error code, or OK.
type Code uint8

// The TChannel system error codes (TChannel protocol, "Error codes").
const (
	// OK is not a wire code: the call got a response (which may still carry
	// an application error).
	OK         Code = 0x00
	Timeout    Code = 0x01
	Cancelled  Code = 0x02
	Busy       Code = 0x03
	Declined   Code = 0x04
	Unexpected Code = 0x05
	BadRequest Code = 0x06
	Network    Code = 0x07
	Protocol   Code = 0xFF
)

// Local codes: the call failed in this process and no server handled it.
// Their values lie outside TChannel's code space.
const (
	// Throttled: every peer's busy limiter refused the call after busy
	// answers; nothing was sent.
	Throttled Code = 0x81
	// NoPeers: the service has no peers.
	NoPeers Code = 0x82
	// RateLimited: the service's leased rate or a server's rate-limit
	// window admits no call before the deadline; nothing was sent.
	RateLimited Code = 0x83
	// Unavailable: no peer has a usable connection (every one is in
	// transient failure: refused, reset, or its handshake failed or timed
	// out); nothing was sent.
	Unavailable Code = 0x84
	// Closed: the calling Channel is closed; nothing was sent.
	Closed Code = 0x85
)

var names = map[Code]string{
	OK:         "OK",
	Timeout:    "TIMEOUT",
	Cancelled:  "CANCELLED",
	Busy:       "BUSY",
	Declined:   "DECLINED",
	Unexpected: "UNEXPECTED",
	BadRequest: "BAD_REQUEST",
	Network:    "NETWORK",
	Protocol:   "PROTOCOL",

	Throttled:   "THROTTLED",
	NoPeers:     "NO_PEERS",
	RateLimited: "RATE_LIMITED",
	Unavailable: "UNAVAILABLE",
	Closed:      "CLOSED",
}

// wire lists every wire code, OK first, in wire order; Errors.Codes()
// gives the error codes to callers (an exported slice could be changed by
// any importer).
var wire = []Code{OK, Timeout, Cancelled, Busy, Declined, Unexpected, BadRequest, Network, Protocol}

// locals lists the local codes.
var locals = []Code{Throttled, NoPeers, RateLimited, Unavailable, Closed}

// Errors is the set of every error code (all but OK): the codes a policy
// may name.
var Errors = NewSet(wire[1:]...)

// String returns the upper-case name policies and stats use ("BUSY",
// "UNAVAILABLE"), or "CODE(0xNN)" for a value neither TChannel nor this
// package defines.
func (c Code) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE(0x%02X)", uint8(c))
}

// Known reports whether c is one of the codes TChannel defines (or OK).
func (c Code) Known() bool {
	_, ok := names[c]
	return ok && !c.IsLocal()
}

// IsLocal reports whether c is a local code: the call failed in this
// process, and no server's handler saw it.
func (c Code) IsLocal() bool { return c >= Throttled && c <= Closed }

// Parse returns the wire error code named s ("BUSY", case-insensitive). OK
// and the local codes are not accepted: a policy can name neither.
func Parse(s string) (Code, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	for c, n := range names {
		if n != u {
			continue
		}
		switch {
		case c.IsLocal():
			return 0, fmt.Errorf("codes: %s is a local outcome (nothing reached a server), not a TChannel code a policy can name", n)
		case c != OK:
			return c, nil
		}
	}
	return 0, fmt.Errorf("codes: unknown code %q, want one of TIMEOUT, CANCELLED, BUSY, DECLINED, UNEXPECTED, BAD_REQUEST, NETWORK, PROTOCOL", s)
}

// Set is a set of codes, cheap to test on a hot path.
type Set uint16

// NewSet returns the set holding cs.
func NewSet(cs ...Code) Set {
	var s Set
	for _, c := range cs {
		s |= bit(c)
	}
	return s
}

// Has reports whether c is in the set.
func (s Set) Has(c Code) bool { b := bit(c); return b != 0 && s&b != 0 }

// Codes returns the members in wire order.
func (s Set) Codes() []Code {
	var out []Code
	for _, c := range wire {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

func bit(c Code) Set {
	switch {
	case c <= Network:
		return 1 << c
	case c == Protocol:
		return 1 << 15
	}
	return 0
}
