package hostile

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/tools/internal/millis"
	"github.com/sluice-rpc/sluice/tools/internal/table"
)

// Result is one attack's figures: typed fields for what tests check, and
// Figures, every figure as the table prints it, in order.
type Result struct {
	Attack Attack `json:"attack"`
	Size   Size   `json:"size"`
	// Commit names the server's build, when known.
	Commit  string          `json:"commit"`
	Elapsed millis.Duration `json:"elapsed_ms"`
	Server  ServerFigures   `json:"server"`
	// Cases are the frames, requests or client runs sent one by one.
	Cases []Case `json:"cases"`
	Conns *Conns `json:"conns"` // the attacker's connections
	// Probe is a new client's calls during the attack, Side a client's
	// steady load, Legit one legitimate call (unfinished: a large call;
	// doorman-silent: `sluice-lab doorman get`).
	Probe    *Load    `json:"probe"`
	Side     *Load    `json:"side"`
	Legit    *Call    `json:"legit"`
	Figures  []Figure `json:"figures"`
	Problems []string `json:"problems"` // what the harness could not measure
}

// Figure is one line of a result: a name and its value.
type Figure struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ServerFigures are the server process's figures over an attack: memory
// in bytes (0 when unknown) and goroutines (-1 when unknown) before, at
// the sampled peak and after. The live heap is HeapAlloc right after a
// collection: freed memory shows there at once, while the runtime keeps
// it resident for minutes.
type ServerFigures struct {
	// Flags are the limit flags the server was started with; Missing
	// those its binary lacks.
	Flags   []string `json:"flags"`
	Missing []string `json:"missing"`
	// Crashes are the server's deaths, each "case: how" (a Go panic's
	// message and where).
	Crashes          []string `json:"crashes"`
	AliveAfter       bool     `json:"alive_after"`
	RSSBefore        int64    `json:"rss_before"`
	RSSPeak          int64    `json:"rss_peak"`
	RSSAfter         int64    `json:"rss_after"`
	GoroutinesBefore int      `json:"goroutines_before"`
	GoroutinesPeak   int      `json:"goroutines_peak"`
	GoroutinesAfter  int      `json:"goroutines_after"`
	HeapBefore       int64    `json:"heap_before"`
	HeapAfter        int64    `json:"heap_after"`
}

// Case is one frame, request or client run sent on its own, and what
// followed.
type Case struct {
	Name string `json:"name"`
	// Survived says the server (or, for a Client run, the client) did not
	// crash; Crash is how it died.
	Survived bool   `json:"survived"`
	Crash    string `json:"crash"`
	// Closed says the server closed the case's connection, After how long;
	// Answer is what it sent on it first ("error BAD_REQUEST \"...\"").
	Closed bool            `json:"closed"`
	After  millis.Duration `json:"after_ms"`
	Answer string          `json:"answer"`
	// Next is a call made after the case, on the same connection
	// (big-args) or from a new client.
	Next   *Call  `json:"next"`
	Client bool   `json:"client"`
	Exit   int    `json:"exit"` // a client's exit code, -1 if it did not exit
	Note   string `json:"note"`
}

// Conns are an attacker's connections and what the server did to them:
// of Wanted connects, Opened were held once the attack was in place
// (after ReadyIn), Early closed by the server before, Failed did not
// connect. The server closed Closed in all (Early included), First,
// Median and Last at those times from the start.
type Conns struct {
	Wanted  int             `json:"wanted"`
	Opened  int             `json:"opened"`
	Early   int             `json:"early"`
	Failed  int             `json:"failed"`
	ReadyIn millis.Duration `json:"ready_in_ms"`
	Closed  int             `json:"closed"`
	First   millis.Duration `json:"first_ms"`
	Median  millis.Duration `json:"median_ms"`
	Last    millis.Duration `json:"last_ms"`
}

func (c *Conns) String() string {
	s := fmt.Sprintf("%d connects in %s: %d held", c.Wanted, ms(c.ReadyIn.D()), c.Opened)
	if c.Early > 0 {
		s += fmt.Sprintf(", %d closed by the server at once", c.Early)
	}
	if c.Failed > 0 {
		s += fmt.Sprintf(", %d failed", c.Failed)
	}
	return s
}

func (c *Conns) closedString() string {
	if c.Closed == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (first at %s, median %s, last %s)", c.Closed, sec(c.First.D()), sec(c.Median.D()), sec(c.Last.D()))
}

func (r *Result) fig(name, format string, args ...any) {
	r.Figures = append(r.Figures, Figure{name, fmt.Sprintf(format, args...)})
}

// note appends a figure whose value is v, unless v is empty.
func (r *Result) note(name, v string) {
	if v != "" {
		r.fig(name, "%s", v)
	}
}

func (r *Result) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// caseCounts counts the cases survived, closed and followed by a served call.
func (r *Result) caseCounts() (survived, closed, served int) {
	for _, c := range r.Cases {
		if c.Survived {
			survived++
		}
		if c.Closed {
			closed++
		}
		if c.Next != nil && c.Next.OK {
			served++
		}
	}
	return survived, closed, served
}

func (r *Result) caseFigures() {
	for _, c := range r.Cases {
		r.fig(c.Name, "%s", c.String())
	}
}

func (c Case) String() string {
	if c.Client {
		if c.Crash != "" {
			return fmt.Sprintf("CLIENT CRASHED (exit %d) after %s: %s%s", c.Exit, sec(c.After.D()), c.Crash, c.Note)
		}
		return fmt.Sprintf("exit %d after %s: %s", c.Exit, ms(c.After.D()), c.Note)
	}
	var parts []string
	if !c.Survived {
		parts = append(parts, "SERVER DIED: "+c.Crash)
	}
	switch {
	case c.Closed && c.Answer != "":
		parts = append(parts, fmt.Sprintf("connection closed after %s, having sent %s", ms(c.After.D()), c.Answer))
	case c.Closed:
		parts = append(parts, "connection closed after "+ms(c.After.D()))
	case c.Answer != "":
		parts = append(parts, fmt.Sprintf("answered %s after %s, connection open", c.Answer, ms(c.After.D())))
	case c.Survived && c.After > 0:
		parts = append(parts, fmt.Sprintf("connection open, nothing sent in %s", ms(c.After.D())))
	}
	if c.Next != nil {
		parts = append(parts, "then a call: "+c.Next.String())
	}
	if c.Note != "" {
		parts = append(parts, c.Note)
	}
	return strings.Join(parts, "; ")
}

func (r *Result) serverFigures() {
	s := &r.Server
	if len(s.Crashes) > 0 {
		r.fig("server", "CRASHED %d time(s): %s", len(s.Crashes), strings.Join(s.Crashes, " | "))
	} else if s.AliveAfter {
		r.fig("server", "survived")
	} else {
		r.fig("server", "not running at the end")
	}
	if s.RSSBefore > 0 || s.RSSPeak > 0 {
		r.fig("server RSS MiB before/peak/after", "%s / %s / %s", mb(s.RSSBefore), mb(s.RSSPeak), mb(s.RSSAfter))
	}
	if s.HeapBefore > 0 || s.HeapAfter > 0 {
		r.fig("server live heap MiB before/after", "%s / %s", mb(s.HeapBefore), mb(s.HeapAfter))
	}
	if s.GoroutinesBefore >= 0 || s.GoroutinesPeak >= 0 {
		r.fig("server goroutines before/peak/after", "%s / %s / %s", count(s.GoroutinesBefore), count(s.GoroutinesPeak), count(s.GoroutinesAfter))
	}
	if len(s.Flags) > 0 {
		r.fig("server limit flags", "%s", strings.Join(s.Flags, " "))
	}
	if len(s.Missing) > 0 {
		r.fig("server lacks flags", "%s", strings.Join(s.Missing, " "))
	}
}

func mb(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

func count(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func sec(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// WriteTable writes every result's figures, one row each (attack, figure,
// value), as aligned text or a Markdown table; problems are "PROBLEM" rows.
func WriteTable(w io.Writer, rs []*Result, markdown bool) error {
	rows := [][]string{{"attack", "figure", "value"}}
	for _, r := range rs {
		for _, f := range r.Figures {
			rows = append(rows, []string{string(r.Attack), f.Name, f.Value})
		}
		for _, p := range r.Problems {
			rows = append(rows, []string{string(r.Attack), "PROBLEM", p})
		}
		rows = append(rows, []string{string(r.Attack), "elapsed", sec(r.Elapsed.D())})
	}
	return table.Write(w, rows, markdown, true)
}
