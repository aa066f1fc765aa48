package hostile

import (
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/benchrun"
)

// Attack names one attack.
type Attack string

// The attacks, in the order Attacks lists them.
const (
	Checksum          Attack = "checksum"
	ChecksumClient    Attack = "checksum-client"
	StallHandshaken   Attack = "stall-handshaken"
	StallPrehandshake Attack = "stall-prehandshake"
	Unfinished        Attack = "unfinished"
	UnreadReplies     Attack = "unread-replies"
	ConnectReset      Attack = "connect-reset"
	BigArgs           Attack = "big-args"
	Headers           Attack = "headers"
	Malformed         Attack = "malformed"
	Soak              Attack = "soak"
	DoormanSilent     Attack = "doorman-silent"
	DoormanFlood      Attack = "doorman-flood"
	DoormanMalformed  Attack = "doorman-malformed"
	BigAnswersClient  Attack = "big-answers-client"
	DoormanPoison     Attack = "doorman-poison"
	DoormanResources  Attack = "doorman-resources"
	DebugIdle         Attack = "debug-idle"
)

// attackInfo is what the runner knows of an attack.
type attackInfo struct {
	name    Attack
	about   string
	doorman bool // attacks a Doorman server, not a TChannel one
	// client: attacks a client the attack runs itself; no server is
	// started.
	client bool
	run    func(e *env) error
}

func attackTable() []attackInfo {
	return []attackInfo{
		{Checksum, "a call frame with checksum type 4, and one with no argument chunk", false, false, runChecksum},
		{ChecksumClient, "a hostile server answers `sluice call` with those frames", false, true, runChecksumClient},
		{StallHandshaken, "connections that finish the handshake and then send nothing", false, false, runStallHandshaken},
		{StallPrehandshake, "connections that never send the init frame", false, false, runStallPrehandshake},
		{Unfinished, "large requests whose last fragment never comes", false, false, runUnfinished},
		{UnreadReplies, "echo calls whose replies are never read", false, false, runUnreadReplies},
		{UnreadTotal, "12 connections that never read and 20 that trickle, 1,100 echo calls each", false, false, runUnreadTotal},
		{ConnectReset, "connect and reset as fast as possible", false, false, runConnectReset},
		{BigArgs, "10 MB and 100 MB arguments, then a normal call on the same connection", false, false, runBigArgs},
		{Headers, "a JSON call with 100k headers and a raw call with a big arg2", false, false, runHeaders},
		{Malformed, "malformed frames, one connection each", false, false, runMalformed},
		{Soak, "a steady legitimate load, memory sampled", false, false, runSoak},
		{DoormanSilent, "silent TCP connections to a Doorman server, then a new client", true, false, runDoormanSilent},
		{DoormanFlood, "client ids from one source flood a Doorman server; clients from another ask", true, false, runDoormanFlood},
		{DoormanMalformed, "garbage GetCapacity and other requests to a Doorman server", true, false, runDoormanMalformed},
		{BigAnswersClient, "a hostile server answers 40 calls in flight from `sluice bench` at once, 67 MB each", false, true, runBigAnswersClient},
		{DoormanPoison, "two Doorman clients want 1e308 of a PROPORTIONAL_SHARE resource; legitimate clients ask", true, false, runDoormanPoison},
		{DoormanResources, "resource ids from one source fill a Doorman server; a client from another asks a configured one", true, false, runDoormanResources},
		{DebugIdle, "idle keep-alive connections to the debug listener; a new client calls over TChannel", false, false, runDebugIdle},
	}
}

// Attacks returns every attack, in the order a run makes them.
func Attacks() []Attack {
	t := attackTable()
	out := make([]Attack, len(t))
	for i, a := range t {
		out[i] = a.name
	}
	return out
}

// About returns a one-line description of a, or "" if a is unknown.
func (a Attack) About() string {
	if info, ok := lookup(a); ok {
		return info.about
	}
	return ""
}

// Doorman reports whether a attacks a Doorman server.
func (a Attack) Doorman() bool {
	info, _ := lookup(a)
	return info.doorman
}

func lookup(a Attack) (attackInfo, bool) {
	for _, info := range attackTable() {
		if info.name == a {
			return info, true
		}
	}
	return attackInfo{}, false
}

// ParseAttacks reads a comma-separated list of attack names; "all" (or "")
// is every attack.
func ParseAttacks(s string) ([]Attack, error) {
	if strings.TrimSpace(s) == "" {
		return Attacks(), nil
	}
	return benchrun.ParseList(s, Attacks(), "attack")
}

// Size is how big an attack is: Full or CI ("full", "ci").
type Size = benchrun.Size

// The sizes.
const (
	// Full is the size of the report that found the attacks: 20,000
	// connections, 400 unfinished requests of 4 MB, 5,000 unread replies,
	// 20 s of connect-reset, 3 minutes of soak, 300,000 Doorman client
	// ids. A run of every attack takes about ten minutes.
	Full = benchrun.Full
	// CI is small enough for go test: a few seconds an attack.
	CI = benchrun.CI
)

// params are an attack's numbers at a size.
type params struct {
	conns      int           // stall, doorman-silent: connections held
	hold       time.Duration // how long the attack holds once in place
	settle     time.Duration // from the attacker leaving to the "after" figures
	probeEvery time.Duration // the new client's interval between calls
	deadline   time.Duration // every legitimate call's deadline
	sideRate   float64       // the side client's calls per second

	unfinished     int           // unfinished requests
	unfinishedSize int           // bytes of each (arg3)
	unfinishedOver time.Duration // sent at a steady pace over this long
	unfinishedTTL  time.Duration
	unfinishedTo   int           // connections they are sent on
	unfinishedHold time.Duration // held once sent, before the attacker leaves
	// unfinishedAfter: from the attacker leaving to the "after" figures.
	unfinishedAfter time.Duration
	legitSize       int // the legitimate large call's arg3
	legitDeadline   time.Duration

	unread     int // unread calls
	unreadSize int // each one's arg3

	resetFor     time.Duration // connect-reset's duration
	resetWorkers int

	soakRate  float64
	soakFor   time.Duration
	soakEvery time.Duration // the RSS sampling interval

	closeWait time.Duration // malformed: how long to wait for a connection to close

	floodIDs   int // doorman-flood: client ids from the flooding source
	floodNew   int // new clients from another source
	getTimeout time.Duration
	// floodResources: doorman-resources' resource ids from the flooding
	// source (the server's default table holds 100,000).
	floodResources int
}

func paramsFor(s Size) params {
	if s == CI {
		return params{
			conns: 200, hold: 3 * time.Second, settle: time.Second,
			probeEvery: 100 * time.Millisecond, deadline: time.Second, sideRate: 100,
			unfinished: 20, unfinishedSize: 1 << 20, unfinishedOver: 2 * time.Second,
			unfinishedTTL: 120 * time.Second, unfinishedTo: 4, unfinishedHold: time.Second,
			unfinishedAfter: 2 * time.Second, legitSize: 1 << 20, legitDeadline: 10 * time.Second,
			unread: 500, unreadSize: 60 << 10,
			resetFor: 2 * time.Second, resetWorkers: 2,
			soakRate: 1000, soakFor: 2 * time.Second, soakEvery: 500 * time.Millisecond,
			closeWait: 200 * time.Millisecond,
			floodIDs:  3000, floodNew: 20, getTimeout: 10 * time.Second,
			floodResources: 101_000,
		}
	}
	return params{
		conns: 20_000, hold: 30 * time.Second, settle: 10 * time.Second,
		probeEvery: 100 * time.Millisecond, deadline: time.Second, sideRate: 200,
		unfinished: 400, unfinishedSize: 4_000_000, unfinishedOver: 20 * time.Second,
		unfinishedTTL: 120 * time.Second, unfinishedTo: 4, unfinishedHold: 10 * time.Second,
		unfinishedAfter: 60 * time.Second, legitSize: 4_000_000, legitDeadline: 30 * time.Second,
		unread: 5000, unreadSize: 60 << 10,
		resetFor: 20 * time.Second, resetWorkers: 4,
		soakRate: 5000, soakFor: 3 * time.Minute, soakEvery: 10 * time.Second,
		closeWait: 2 * time.Second,
		floodIDs:  300_000, floodNew: 100, getTimeout: 30 * time.Second,
		floodResources: 101_000,
	}
}
