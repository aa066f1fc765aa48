package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/internal/debughttp"
)

// The acceptance test: every attack at CI size against a freshly built
// sluice, checking what DESIGN.md's "Hostile input" promises. Until the
// servers are fixed it fails, naming what each attack did to them.
func TestAttacksCI(t *testing.T) {
	slowtest.Skip(t, "45 s of attacks on a server process")
	runAttacks(t, CI)
}

// The same at full size: 20,000 connections, 400 requests of 4 MB, ...
// About ten minutes; run with -hostile.full.
func TestAttacksFull(t *testing.T) {
	if !*fullSize {
		t.Skip("the full size runs with -hostile.full (about ten minutes)")
	}
	runAttacks(t, Full)
}

// attackLimit bounds one attack, far above what any takes.
func attackLimit(s Size) time.Duration {
	if s == CI {
		return 3 * time.Minute
	}
	return 20 * time.Minute
}

func runAttacks(t *testing.T, size Size) {
	bin := serverBin(t)
	cfg := Config{Size: size, ServerBin: bin}
	for _, a := range Attacks() {
		t.Run(string(a), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), attackLimit(size))
			defer cancel()
			r, err := RunAttack(ctx, a, cfg)
			if r != nil {
				var b strings.Builder
				WriteTable(&b, []*Result{r}, false)
				t.Logf("%s size:\n%s", size, b.String())
			}
			if err != nil {
				t.Fatalf("the attack could not be made: %v", err)
			}
			if ctx.Err() != nil {
				t.Fatalf("the attack ran past its %v limit", attackLimit(size))
			}
			for _, p := range r.Problems {
				t.Errorf("the harness could not measure everything: %s", p)
			}
			checks[a](t, r)
		})
	}
}

// Failed is the number of calls that failed.
func (l *Load) Failed() int { return l.Calls - l.OK }

// checks hold what must be true of a server after each attack.
var checks = map[Attack]func(t *testing.T, r *Result){
	Checksum:          checkChecksum,
	ChecksumClient:    checkClient,
	StallHandshaken:   checkStall,
	StallPrehandshake: checkStall,
	Unfinished:        checkUnfinished,
	UnreadReplies:     checkUnread,
	UnreadTotal:       checkUnreadTotal,
	ConnectReset:      checkSurvived,
	BigArgs:           checkBigArgs,
	Headers:           checkHeaders,
	Malformed:         checkCases,
	Soak:              checkSideServed,
	DoormanSilent:     checkDoormanGet,
	DoormanFlood:      checkDoormanFlood,
	DoormanMalformed:  checkCases,
	BigAnswersClient:  checkBigAnswers,
	DoormanPoison:     checkDoormanPoison,
	DoormanResources:  checkDoormanResources,
	DebugIdle:         checkDebugIdle,
}

// checkDebugIdle: idle connections to the debug listener never lock out
// a TChannel client of the same process, and the listener holds at most
// its cap of them.
func checkDebugIdle(t *testing.T, r *Result) {
	checkSurvived(t, r)
	p, c := r.Probe, r.Conns
	switch {
	case p == nil || p.Calls == 0:
		t.Fatal("no new client's call was made during the attack")
	case p.Failed() > 0:
		t.Errorf("a new TChannel client's calls during the attack: %s (first error: %s); the debug listener must not take the descriptors the TChannel listener needs",
			p, p.FirstError)
	}
	if open := c.Opened - (c.Closed - c.Early); open > debughttp.MaxConns {
		t.Errorf("%d of the %d idle connections to the debug listener were still open at the end; it holds at most %d", open, c.Opened, debughttp.MaxConns)
	}
}

// checkSurvived: no input crashes the server.
func checkSurvived(t *testing.T, r *Result) {
	if n := len(r.Server.Crashes); n > 0 {
		t.Errorf("the server crashed %d time(s): %s; no input may reach a code path that panics", n, strings.Join(r.Server.Crashes, " | "))
	} else if !r.Server.AliveAfter {
		t.Errorf("the server was not running at the end of the attack")
	}
}

// checkCases: the server survives every case and serves a new client
// (a valid request) after each.
func checkCases(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if len(r.Cases) == 0 {
		t.Fatal("no case was sent")
	}
	for _, c := range r.Cases {
		switch {
		case !c.Survived && c.Crash != "":
			t.Errorf("%s: the server process died (%s); a malformed frame must close only its connection", c.Name, c.Crash)
		case !c.Survived:
			t.Errorf("%s: not sent (%s)", c.Name, c.Note)
		case c.Next == nil || !c.Next.OK:
			t.Errorf("%s: the server survived, but a new client's call after it failed: %v", c.Name, c.Next)
		}
	}
}

// checkChecksum: the crash frames close their connection, and only that.
func checkChecksum(t *testing.T, r *Result) {
	checkCases(t, r)
	for _, c := range r.Cases {
		if c.Survived && !c.Closed {
			t.Errorf("%s: the server left the connection open (%s); a malformed frame must close the connection that sent it", c.Name, c)
		}
	}
}

// checkClient: a client answered with a crash frame fails its call; it
// does not crash.
func checkClient(t *testing.T, r *Result) {
	if len(r.Cases) == 0 {
		t.Fatal("no client was run")
	}
	for _, c := range r.Cases {
		switch {
		case c.Crash != "":
			t.Errorf("%s: `sluice call` crashed (exit %d): %s; a response frame from a hostile server must fail the call, not the process", c.Name, c.Exit, c.Crash)
		case c.Exit != 1:
			t.Errorf("%s: `sluice call` exited %d (%s); want 1, a failed call", c.Name, c.Exit, c.Note)
		}
	}
}

// flagValue returns the value of the limit flag name the server was
// started with.
func flagValue(r *Result, name string) (string, bool) {
	for _, f := range r.Server.Flags {
		if v, ok := strings.CutPrefix(f, "--"+name+" "); ok {
			return v, true
		}
	}
	return "", false
}

// checkStall: stalled connections leave a new client's calls succeeding
// within their deadline, and the server's limits close them.
func checkStall(t *testing.T, r *Result) {
	checkSurvived(t, r)
	p, c := r.Probe, r.Conns
	switch {
	case p == nil || p.Calls == 0:
		t.Fatal("no new client's call was made during the attack")
	case p.Failed() > 0:
		t.Errorf("a new client's calls during the attack: %s (first error: %s); stalled connections must not lock out a client that calls",
			p, p.FirstError)
	}
	if len(r.Server.Missing) > 0 {
		t.Logf("the server lacks %v: those limits are not checked", r.Server.Missing)
	}
	if v, ok := flagValue(r, "max-conns"); ok {
		n, _ := strconv.Atoi(v)
		if c.Closed < c.Opened-n {
			t.Errorf("with --max-conns %d the server closed only %d of the %d stalled connections held; it must close connections at its cap", n, c.Closed, c.Opened)
		}
	}
	name, kind := "idle-timeout", "completed the handshake and then sent nothing"
	if r.Attack == StallPrehandshake {
		name, kind = "handshake-timeout", "never sent an init frame"
	}
	if v, ok := flagValue(r, name); ok && c.Closed < c.Opened {
		t.Errorf("with --%s %s, %d of the %d connections that %s were still open after %s held",
			name, v, c.Opened-c.Closed, c.Opened, kind, sec(paramsFor(r.Size).hold))
	}
	checkPeak(t, r)
}

// fullPeak bounds the server's resident memory at its peak during a
// full-size attack that holds connections or requests (the stall attacks,
// unfinished): the limits bound what peers can make it hold while they
// hold it, so the peak is bounded whatever the runtime returns afterwards.
// 20,000 stalled connections (10,000 held at the default cap) peak at
// 270-290 MiB; without the cap, at over 500.
const fullPeak = 300 << 20

// checkPeak: at full size, the server's peak resident memory stays under
// fullPeak. (At CI size the attacks are too small for the limits to show
// in the peak: 200 stalled connections hold a few MiB.)
func checkPeak(t *testing.T, r *Result) {
	s := r.Server
	switch {
	case r.Size != Full:
	case s.RSSPeak == 0:
		t.Errorf("the server's peak memory was not measured")
	case s.RSSPeak > fullPeak:
		t.Errorf("the server's resident memory peaked at %s MiB during the attack (%s MiB before), over %s MiB; what peers can make it hold must be bounded by its limits",
			mb(s.RSSPeak), mb(s.RSSBefore), mb(fullPeak))
	}
}

// checkUnfinished: unfinished requests are bounded: the server's memory
// stays under a bound during the attack, what the requests held is freed
// once the attacker leaves (the live heap drops back), and legitimate
// calls go on. Resident memory after the attack is reported, not checked:
// the runtime returns freed pages to the system at its own pace (after
// its next collection, which with no traffic may be two minutes on), and
// the Channel does not force it; what the limits bound is the peak.
func checkUnfinished(t *testing.T, r *Result) {
	checkSurvived(t, r)
	s := r.Server
	if r.Legit == nil || !r.Legit.OK {
		t.Errorf("the legitimate large call during the attack: %v; it must succeed", r.Legit)
	}
	checkSide(t, r)
	bound := int64(512 << 20)
	if r.Size == CI {
		bound = 64 << 20
	}
	growth := s.RSSPeak - s.RSSBefore
	if s.RSSBefore == 0 || s.RSSPeak == 0 {
		t.Errorf("the server's memory was not measured")
	} else if growth > bound {
		t.Errorf("the server's memory grew by %s MiB during the attack (%s -> %s MiB), over the %s MiB bound; unfinished requests must be bounded per connection and per server",
			mb(growth), mb(s.RSSBefore), mb(s.RSSPeak), mb(bound))
	}
	checkPeak(t, r)
	const slack = 16 << 20
	if s.HeapBefore == 0 || s.HeapAfter == 0 {
		t.Errorf("the server's live heap was not measured")
	} else if s.HeapAfter-s.HeapBefore > slack {
		t.Errorf("the server's live heap was %s MiB after the attacker left, %s MiB before; what unfinished requests held must be freed with their connections",
			mb(s.HeapAfter), mb(s.HeapBefore))
	}
	if s.GoroutinesBefore >= 0 && s.GoroutinesAfter > s.GoroutinesBefore+10 {
		t.Errorf("the server had %d goroutines before the attack and %d after the attacker left; the unfinished requests' goroutines must end with their connections",
			s.GoroutinesBefore, s.GoroutinesAfter)
	}
}

// checkSide: the side client's calls all succeed, fast at full size.
func checkSide(t *testing.T, r *Result) {
	l := r.Side
	switch {
	case l == nil || l.Calls == 0:
		t.Errorf("the side client made no call")
		return
	case l.Failed() > 0:
		t.Errorf("the side client's calls during the attack: %s (first error: %s); legitimate calls must go on", l, l.FirstError)
	}
	limit := 10 * time.Millisecond
	if r.Size == CI {
		if slowtest.Race {
			return // the race detector slows the client too much to time it
		}
		limit = 100 * time.Millisecond
	}
	if l.P99.D() > limit {
		t.Errorf("the side client's p99 during the attack was %s, over %s", ms(l.P99.D()), ms(limit))
	}
}

// checkSideServed: the server survives and its side client is served.
func checkSideServed(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if l := r.Side; l == nil || l.Calls == 0 || l.Failed() > 0 {
		t.Errorf("the side client's calls during the attack: %s; legitimate calls must go on", l)
	}
}

// checkUnread: a connection whose replies are never read is closed at the
// write timeout, and the side client is served.
func checkUnread(t *testing.T, r *Result) {
	checkSideServed(t, r)
	if v, ok := flagValue(r, "write-timeout"); ok && (r.Conns == nil || r.Conns.Closed == 0) {
		t.Errorf("with --write-timeout %s the server left open, for the %s the attack held, a connection that read none of its replies",
			v, sec(paramsFor(r.Size).hold))
	}
}

// checkDoormanFlood: clients from one source cannot lock out another's.
func checkDoormanFlood(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if l := r.Probe; l == nil || l.Calls == 0 || l.OK < l.Calls {
		t.Errorf("new clients from %s while %s flooded the server: %s got a lease; a flood from one source must not lock out clients from another",
			newSource, floodSource, l)
	}
}

// checkDoormanPoison: clients wanting 1e308 leave every legitimate grant
// finite, positive and within the capacity, during the attack and after.
func checkDoormanPoison(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if l := r.Probe; l == nil || l.Calls == 0 || l.OK < l.Calls {
		t.Errorf("legitimate clients beside two wanting 1e308: %s; every grant must be finite, positive and within the capacity", l)
	}
}

// checkDoormanResources: a flood of resource ids from one source leaves a
// client of another the configured resource and one of its own.
func checkDoormanResources(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if l := r.Probe; l == nil || l.Calls == 0 || l.OK < l.Calls {
		t.Errorf("new clients from %s after %s filled the resource table: %s got both; a flood from one source must not take another's share",
			newSource, floodSource, l)
	}
}

// checkBigArgs: an argument past the limit is answered BAD_REQUEST, and
// the same connection then serves a normal call.
func checkBigArgs(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if len(r.Cases) != 2 {
		t.Fatalf("%d big calls made, want 2", len(r.Cases))
	}
	for _, c := range r.Cases {
		if !strings.HasPrefix(c.Answer, "error BAD_REQUEST") {
			t.Errorf("%s: answered %q (%s); want BAD_REQUEST", c.Name, c.Answer, c)
		}
		if c.Next == nil || !c.Next.OK {
			t.Errorf("%s: the next call on the same connection: %v; the connection must go on serving", c.Name, c.Next)
		}
	}
}

// checkHeaders: huge headers are answered and the server goes on.
func checkHeaders(t *testing.T, r *Result) {
	checkCases(t, r)
	for _, c := range r.Cases {
		if c.Answer == "" {
			t.Errorf("%s: not answered (%s)", c.Name, c)
		}
	}
}

// checkDoormanGet: silent connections leave a new Doorman client served.
func checkDoormanGet(t *testing.T, r *Result) {
	checkSurvived(t, r)
	if r.Legit == nil || !r.Legit.OK {
		t.Errorf("`sluice doorman get` during the attack: %v; silent connections must not lock out a client", r.Legit)
	}
}

// Attacks and their names round-trip through ParseAttacks.
func TestParseAttacks(t *testing.T) {
	all, err := ParseAttacks("all")
	if err != nil || len(all) != len(Attacks()) {
		t.Fatalf("ParseAttacks(all) = %v, %v", all, err)
	}
	got, err := ParseAttacks(" checksum,malformed,checksum ")
	if err != nil || fmt.Sprint(got) != "[checksum malformed]" {
		t.Errorf("ParseAttacks = %v, %v; want [checksum malformed]", got, err)
	}
	if _, err := ParseAttacks("checksum,flood"); err == nil || !strings.Contains(err.Error(), `unknown attack "flood"`) {
		t.Errorf("an unknown attack: %v", err)
	}
	for _, a := range Attacks() {
		if a.About() == "" || checks[a] == nil {
			t.Errorf("%s has no description or no check", a)
		}
	}
}

// The sizes are spelled as every suite spells them, in `sluice-lab hostile`'s
// "ci size" line and in a result's JSON: "full" and "ci" (hostile printed
// "CI" before the suites shared one Size).
func TestSizeNames(t *testing.T) {
	js, err := json.Marshal(&Result{Attack: Checksum, Size: CI})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%s size", CI) != "ci size" || Full.String() != "full" || !strings.Contains(string(js), `"size":"ci"`) {
		t.Errorf("sizes %q and %q, JSON %s; want full, ci and \"size\":\"ci\"", Full, CI, js)
	}
}
