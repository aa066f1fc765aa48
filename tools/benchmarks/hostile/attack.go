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
	// Full is the size of the report that found the attacks (20,000
	// connections, ...): about ten minutes for every attack.
	Full = benchrun.Full
	// CI is small enough for go test: a few seconds an attack.
	CI = benchrun.CI
)

// Numbers every size shares.
const (
	probeEvery     = 100 * time.Millisecond // the new client's interval between calls
	callDeadline   = time.Second            // every legitimate call's deadline
	unfinishedTTL  = 120 * time.Second
	unfinishedTo   = 4        // unfinished's connections
	unreadSize     = 60 << 10 // the unread calls' arg3
	floodResources = 101_000  // doorman-resources' ids (the server's table holds 100,000)
	bigAnswers     = 40       // big-answers-client's calls
)

// params are an attack's numbers at a size.
type params struct {
	conns    int           // connections held (stall, doorman-silent, debug-idle)
	hold     time.Duration // how long the attack holds once in place
	settle   time.Duration // from the attacker leaving to the "after" figures
	sideRate float64       // the side client's calls per second
	// unfinished: requests of unfinishedSize bytes over unfinishedOver;
	// the legitimate call.
	unfinished, unfinishedSize                      int
	unfinishedOver, unfinishedHold, unfinishedAfter time.Duration
	legitSize                                       int
	legitDeadline                                   time.Duration
	unread                                          int // unread-replies' calls
	resetFor                                        time.Duration
	resetWorkers                                    int
	soakRate                                        float64
	soakFor, soakEvery                              time.Duration // soakEvery: the RSS sampling interval
	closeWait                                       time.Duration // malformed: the wait for a connection to close
	floodIDs, floodNew                              int           // doorman-flood's client ids, and new clients from another source
	getTimeout                                      time.Duration
	never, trickle, totalCalls                      int // unread-total's connections, and each one's calls
	trickleEvery, totalHold                         time.Duration
	bigAnswerSize                                   int // each answer's arg3; at full size just under the client's 64 MiB limit on one response
}

func paramsFor(s Size) params {
	d := func(full, ci time.Duration) time.Duration { return benchrun.Pick(s, full, ci) }
	n := func(full, ci int) int { return benchrun.Pick(s, full, ci) }
	return params{
		conns: n(20_000, 200), hold: d(30*time.Second, 3*time.Second), settle: d(10*time.Second, time.Second),
		sideRate:   float64(n(200, 100)),
		unfinished: n(400, 20), unfinishedSize: n(4_000_000, 1<<20), unfinishedOver: d(20*time.Second, 2*time.Second),
		unfinishedHold: d(10*time.Second, time.Second), unfinishedAfter: d(60*time.Second, 2*time.Second),
		legitSize: n(4_000_000, 1<<20), legitDeadline: d(30*time.Second, 10*time.Second),
		unread: n(5000, 500), resetFor: d(20*time.Second, 2*time.Second), resetWorkers: n(4, 2),
		soakRate: float64(n(5000, 1000)), soakFor: d(3*time.Minute, 2*time.Second), soakEvery: d(10*time.Second, 500*time.Millisecond),
		closeWait: d(2*time.Second, 200*time.Millisecond),
		floodIDs:  n(300_000, 3000), floodNew: n(100, 20), getTimeout: d(30*time.Second, 10*time.Second),
		never: n(12, 2), trickle: n(20, 2), totalCalls: n(1100, 300),
		trickleEvery: d(5*time.Second, 3*time.Second), totalHold: d(60*time.Second, 4*time.Second),
		bigAnswerSize: n(67_000_000, 16_000_000),
	}
}
