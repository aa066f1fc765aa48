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
	UnreadTotal       Attack = "unread-total"
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

// What an attack is made on.
const (
	onServer  = iota // a `sluice serve`
	onDoorman        // a `sluice doorman serve`
	onClient         // a client the attack runs itself: no server is started
)

type attackInfo struct {
	name   Attack
	about  string
	target int
	run    func(e *env) error
}

func attackTable() []attackInfo {
	return []attackInfo{
		{Checksum, "a call frame with checksum type 4, and one with no argument chunk", onServer, runChecksum},
		{ChecksumClient, "a hostile server answers `sluice call` with those frames", onClient, runChecksumClient},
		{StallHandshaken, "connections that finish the handshake and then send nothing", onServer, runStallHandshaken},
		{StallPrehandshake, "connections that never send the init frame", onServer, runStallPrehandshake},
		{Unfinished, "large requests whose last fragment never comes", onServer, runUnfinished},
		{UnreadReplies, "echo calls whose replies are never read", onServer, runUnreadReplies},
		{UnreadTotal, "12 connections that never read and 20 that trickle, 1,100 echo calls each", onServer, runUnreadTotal},
		{ConnectReset, "connect and reset as fast as possible", onServer, runConnectReset},
		{BigArgs, "10 MB and 100 MB arguments, then a normal call on the same connection", onServer, runBigArgs},
		{Headers, "a JSON call with 100k headers and a raw call with a big arg2", onServer, runHeaders},
		{Malformed, "malformed frames, one connection each", onServer, runMalformed},
		{Soak, "a steady legitimate load, memory sampled", onServer, runSoak},
		{DoormanSilent, "silent TCP connections to a Doorman server, then a new client", onDoorman, runDoormanSilent},
		{DoormanFlood, "client ids from one source flood a Doorman server; clients from another ask", onDoorman, runDoormanFlood},
		{DoormanMalformed, "garbage GetCapacity and other requests to a Doorman server", onDoorman, runDoormanMalformed},
		{BigAnswersClient, "a hostile server answers 40 calls in flight from `sluice bench` at once, 67 MB each", onClient, runBigAnswersClient},
		{DoormanPoison, "two Doorman clients want 1e308 of a PROPORTIONAL_SHARE resource; legitimate clients ask", onDoorman, runDoormanPoison},
		{DoormanResources, "resource ids from one source fill a Doorman server; a client from another asks a configured one", onDoorman, runDoormanResources},
		{DebugIdle, "idle keep-alive connections to the debug listener; a new client calls over TChannel", onServer, runDebugIdle},
	}
}

// Attacks returns every attack, in the order a run makes them.
func Attacks() []Attack {
	var out []Attack
	for _, a := range attackTable() {
		out = append(out, a.name)
	}
	return out
}

// About returns a one-line description of a, or "" if a is unknown.
func (a Attack) About() string {
	info, _ := lookup(a)
	return info.about
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
	conns      int           // stall, doorman-silent, debug-idle: connections held
	hold       time.Duration // how long the attack holds once in place
	settle     time.Duration // from the attacker leaving to the "after" figures
	probeEvery time.Duration // the new client's interval between calls
	deadline   time.Duration // every legitimate call's deadline
	sideRate   float64       // the side client's calls per second

	// unfinished: requests of unfinishedSize bytes sent over
	// unfinishedOver on unfinishedTo connections, held unfinishedHold,
	// the "after" figures unfinishedAfter after the attacker left; and
	// the legitimate large call.
	unfinished, unfinishedSize, unfinishedTo       int
	unfinishedOver, unfinishedTTL                  time.Duration
	unfinishedHold, unfinishedAfter, legitDeadline time.Duration
	legitSize                                      int
	unread, unreadSize                             int // unread-replies' calls and their arg3
	resetFor                                       time.Duration
	resetWorkers                                   int
	soakRate                                       float64
	soakFor, soakEvery                             time.Duration // soakEvery: the RSS sampling interval
	closeWait                                      time.Duration // malformed: the wait for a connection to close
	floodIDs, floodNew                             int           // doorman-flood's client ids, and new clients from another source
	getTimeout                                     time.Duration
	floodResources                                 int // doorman-resources' ids (the server's table holds 100,000)
	never, trickle, totalCalls                     int // unread-total's connections, and each one's calls
	trickleEvery, totalHold                        time.Duration
	bigAnswers, bigAnswerSize                      int // big-answers-client's calls, and each answer's arg3
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
			never:          2, trickle: 2, totalCalls: 300, trickleEvery: 3 * time.Second, totalHold: 4 * time.Second,
			bigAnswers: 40, bigAnswerSize: 16_000_000,
		}
	}
	// unread-total: 12 connections that never read held 1.34 GB, 20
	// trickling ones 2.44 GB, before answers were bounded server-wide.
	// big-answers-client: 40 answers just under the client's 64 MiB
	// limit on one response, 2.68 GB in all.
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
		never:          12, trickle: 20, totalCalls: 1100, trickleEvery: 5 * time.Second, totalHold: 60 * time.Second,
		bigAnswers: 40, bigAnswerSize: 67_000_000,
	}
}
