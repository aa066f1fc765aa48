package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"golang.org/x/time/rate"
)

var demoHelp = Help{
	Synopsis: `sluice demo [flags]`,
	About: `Busy throttling, live: three TChannel servers of service kv start on
127.0.0.1; one of them takes only --capacity requests per second and answers
Busy above that until it heals at second --recover-at. A Sluice channel sends
--rps requests per second for --seconds and prints, every second and for each
peer, the requests sent, the Busy answers, the requests that peer's limiter
refused (each went to another peer), its limit and its connection's state.
It ends by itself with a summary of what it measured: the calls' outcomes,
the overloaded peer's share of the attempts before and after its limiter
reacted, and after it healed.

Exit status: 0 when the demo ran (or was interrupted), 1 when it could not, 2
on a usage error.`,
	Examples: `sluice demo
sluice demo --seconds 10 --rps 500 --capacity 50 --recover-at 4
sluice demo --debug-listen 127.0.0.1:0    # and scrape /metrics while it runs`,
}

// demoConfig shapes the demo: one of three servers is overloaded until
// recoverAt, then heals.
type demoConfig struct {
	seconds     int
	rps         int
	capacity    float64 // what the overloaded server handles per second
	recoverAt   int
	callTimeout time.Duration
}

// demoRun runs `sluice demo`; the end of ctx ends it early. atEnd, a hook
// for tests, if not nil, runs once the metrics are reported, while the
// debug listener (its address, "" if none) and the client channel still
// serve.
func demoRun(ctx context.Context, args []string, stdout, stderr io.Writer, atEnd func(debugAddr string)) int {
	fs := NewFlagSet("sluice demo", demoHelp, stdout, stderr)
	cfg := demoConfig{callTimeout: 500 * time.Millisecond}
	fs.IntVar(&cfg.seconds, "seconds", 14, "how long the demo runs, in seconds (1..30)")
	fs.IntVar(&cfg.rps, "rps", 300, "requests per second the client sends (1..5000)")
	fs.Float64Var(&cfg.capacity, "capacity", 20, "requests per second the overloaded server can take (0 < capacity <= 100000)")
	fs.IntVar(&cfg.recoverAt, "recover-at", 3, "the second at whose end the overloaded server heals (0: never)")
	debugAddr := fs.String("debug-listen", "", DebugListenUsage)
	if code, ok := fs.ParseArgs(args); !ok {
		return code
	}
	switch {
	case cfg.seconds < 1 || cfg.seconds > 30:
		return fs.UsageError("--seconds is %d, must be 1..30", cfg.seconds)
	case cfg.rps < 1 || cfg.rps > 5000:
		return fs.UsageError("--rps is %d, must be 1..5000", cfg.rps)
	case !(cfg.capacity > 0 && cfg.capacity <= 100000): // also rejects NaN and +Inf
		return fs.UsageError("--capacity is %v, must be a number in (0, 100000]", cfg.capacity)
	case cfg.recoverAt < 0:
		return fs.UsageError("--recover-at is %d, must be >= 0", cfg.recoverAt)
	}
	debug, err := NewDebugListener(*debugAddr, stderr)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	defer debug.Close()
	if err := runDemo(ctx, cfg, stdout, stderr, debug, atEnd); err != nil {
		if ctx.Err() != nil { // interrupted: as bench and faults, not a failure
			fmt.Fprintln(stderr, "sluice demo: interrupted")
			return ExitOK
		}
		return fs.Failure("%v", err)
	}
	return ExitOK
}

// demoServer is one in-process TChannel server of service "kv".
type demoServer struct {
	ch         *channel.Channel
	overloaded atomic.Bool
}

func startDemoServer(capacity float64) (*demoServer, error) {
	ch, err := channel.New("kv")
	if err != nil {
		return nil, err
	}
	s := &demoServer{ch: ch}
	lim := rate.NewLimiter(rate.Limit(capacity), max(1, int(capacity/10)))
	err = ch.RegisterRaw("get", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		if s.overloaded.Load() && !lim.Allow() {
			return nil, channel.Busy("overloaded: above %v requests per second", capacity)
		}
		return &channel.RawResponse{Arg3: req.Arg3}, nil
	})
	if err == nil {
		err = ch.ListenAndServe("127.0.0.1:0")
	}
	if err != nil {
		ch.Close()
		return nil, err
	}
	return s, nil
}

// runDemo runs the demo; atEnd as demoRun's.
func runDemo(ctx context.Context, cfg demoConfig, w, stderr io.Writer, debug *DebugListener, atEnd func(debugAddr string)) error {
	var servers []*demoServer
	for range 3 {
		s, err := startDemoServer(cfg.capacity)
		if err != nil {
			return err
		}
		defer s.ch.Close()
		servers = append(servers, s)
	}
	bad := servers[2]
	bad.overloaded.Store(true)

	ch, err := channel.New("demo-client", channel.WithScope(debug.Scope()))
	if err != nil {
		return err
	}
	defer ch.Close()
	client, err := ch.NewClient("kv", channel.WithMethods("get"))
	if err != nil {
		return err
	}
	for _, s := range servers {
		if err := client.AddPeer(s.ch.HostPort()); err != nil {
			return err
		}
	}
	// The client channel's live state, beside /metrics and /debug/pprof/.
	pages := map[string]http.Handler{"/debug/sluice": ch.DebugHandler()}
	if err := debug.Serve("sluice demo", pages); err != nil {
		return err
	}

	heal := "never heals"
	if cfg.recoverAt > 0 {
		heal = fmt.Sprintf("heals at the end of second %d", cfg.recoverAt)
	}
	fmt.Fprintf(w, "sluice demo: 3 TChannel servers on 127.0.0.1; %s takes only %v req/s and answers Busy above that, then %s.\n",
		bad.ch.HostPort(), cfg.capacity, heal)
	fmt.Fprintf(w, "A Sluice channel sends %d req/s for %d s. Each second, per peer: requests sent, busy answers, requests its limiter refused (sent elsewhere), its limit and its connection's state.\n\n",
		cfg.rps, cfg.seconds)
	if err := client.Connect(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "%4s  %-21s %6s %6s %10s %9s  %s\n", "sec", "peer", "sent", "busy", "throttled", "limit", "connection")

	m := demoMeasure{overloaded: bad.ch.HostPort(), recoverAt: cfg.recoverAt}
	var ok, failBusy, failThrottled, failOther atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(cfg.rps))
	defer tick.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
	prev := map[string]peer.Counts{}
	for sec := 1; sec <= cfg.seconds; {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-tick.C:
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, cfg.callTimeout)
				defer cancel()
				_, err := client.CallRaw(cctx, "get", nil, []byte("k"))
				var ce *channel.CallError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &ce) && ce.Code == codes.Throttled:
					failThrottled.Add(1)
				case errors.As(err, &ce) && ce.Code == codes.Busy:
					failBusy.Add(1)
				default:
					failOther.Add(1)
				}
			}()
		case <-second.C:
			s := demoSecond{overloaded: bad.overloaded.Load()}
			for _, p := range client.Peers() {
				q := prev[p.HostPort]
				mark := ""
				if p.HostPort == bad.ch.HostPort() {
					s.badSent, s.badBusy, s.badThrottled = p.Sent-q.Sent, p.Busy-q.Busy, p.Throttled-q.Throttled
					if s.overloaded {
						mark = "  <- overloaded"
					}
				}
				if !p.Ejected.IsZero() {
					mark += "  <- ejected (UNEXPECTED/NETWORK in a row)"
				}
				if p.Slow {
					mark += "  <- slow: probed only"
				}
				s.sent += p.Sent - q.Sent
				fmt.Fprintf(w, "%4d  %-21s %6d %6d %10d %9s  %s%s\n", sec, p.HostPort,
					p.Sent-q.Sent, p.Busy-q.Busy, p.Throttled-q.Throttled, formatLimit(p.Limit), p.State, mark)
				prev[p.HostPort] = p
			}
			m.seconds = append(m.seconds, s)
			if sec == cfg.recoverAt {
				bad.overloaded.Store(false)
				fmt.Fprintf(w, "      %s heals: it stops answering Busy; its limit recovers x4 per second.\n", bad.ch.HostPort())
			}
			sec++
		}
	}
	wg.Wait()

	total := ok.Load() + failBusy.Load() + failThrottled.Load() + failOther.Load()
	fmt.Fprintf(w, "\nsummary: %d calls in %d s: %d succeeded, %d failed BUSY, %d failed THROTTLED (nothing sent), %d failed otherwise.\n",
		total, cfg.seconds, ok.Load(), failBusy.Load(), failThrottled.Load(), failOther.Load())
	for _, p := range client.Peers() {
		fmt.Fprintf(w, "  %-21s sent %6d  busy %5d  throttled %6d  final limit %s  ejections %d  %s\n", p.HostPort, p.Sent, p.Busy, p.Throttled, formatLimit(p.Limit), p.Ejections, p.State)
	}
	fmt.Fprint(w, m.summary())
	if atEnd != nil {
		debug.Flush()
		addr := ""
		if debug.server != nil {
			addr = debug.server.Addr()
		}
		atEnd(addr)
	}
	return nil
}

// formatLimit shows a busy limit as the limiter holds it, so that a limit
// recovering from below 1 (x4 a second) does not read as 0: whole numbers
// from 100 (a window allows floor(limit) requests), one decimal from 0.1,
// two significant digits below.
func formatLimit(l float64) string {
	switch {
	case l >= 100:
		return strconv.FormatFloat(math.Floor(l), 'f', 0, 64)
	case l >= 0.1:
		return strconv.FormatFloat(l, 'f', 1, 64)
	}
	return strconv.FormatFloat(l, 'g', 2, 64)
}

// demoSecond is what one second of the demo measured: attempts sent to
// every peer, and the overloaded peer's attempts, Busy answers and
// requests its limiter refused.
type demoSecond struct {
	overloaded                     bool // it answered Busy above its capacity this second
	sent                           uint64
	badSent, badBusy, badThrottled uint64
}

// demoMeasure is the demo's per-second record, for its summary.
type demoMeasure struct {
	overloaded string // the overloaded peer's host:port
	recoverAt  int
	seconds    []demoSecond
}

// summary tells what the counts show: the overloaded peer's share of the
// attempts while it was overloaded, before and after its limiter first
// refused a request, and its share in the last second after it healed.
func (m demoMeasure) summary() string {
	var sb strings.Builder
	share := func(part, whole uint64) string {
		if whole == 0 {
			return "none of the attempts (none were sent)"
		}
		return fmt.Sprintf("%.1f%% of the attempts (%d of %d)", 100*float64(part)/float64(whole), part, whole)
	}
	span := func(from, to int) string {
		if from == to {
			return fmt.Sprintf("second %d", from)
		}
		return fmt.Sprintf("seconds %d-%d", from, to)
	}
	// Seconds are 1-based; overloaded ones come first.
	lastOverloaded, firstThrottled := 0, 0
	for i, s := range m.seconds {
		if s.overloaded {
			lastOverloaded = i + 1
			if firstThrottled == 0 && s.badThrottled > 0 {
				firstThrottled = i + 1
			}
		}
	}
	sum := func(from, to int) (d demoSecond) {
		for _, s := range m.seconds[from-1 : to] {
			d.sent, d.badSent, d.badBusy, d.badThrottled = d.sent+s.sent, d.badSent+s.badSent, d.badBusy+s.badBusy, d.badThrottled+s.badThrottled
		}
		return d
	}
	if lastOverloaded > 0 {
		fmt.Fprintf(&sb, "While %s was overloaded (%s): ", m.overloaded, span(1, lastOverloaded))
		if firstThrottled == 0 {
			d := sum(1, lastOverloaded)
			fmt.Fprintf(&sb, "its limiter never refused a request; it got %s and answered Busy to %d.\n", share(d.badSent, d.sent), d.badBusy)
		} else {
			if firstThrottled > 1 {
				d := sum(1, firstThrottled-1)
				fmt.Fprintf(&sb, "before its limiter refused any request (%s) it got %s and answered Busy to %d; ",
					span(1, firstThrottled-1), share(d.badSent, d.sent), d.badBusy)
			}
			d := sum(firstThrottled, lastOverloaded)
			fmt.Fprintf(&sb, "once its limiter refused requests (%s) it got %s, answered Busy to %d, and its limiter kept %d requests from it.\n",
				span(firstThrottled, lastOverloaded), share(d.badSent, d.sent), d.badBusy, d.badThrottled)
		}
	}
	if n := len(m.seconds); lastOverloaded < n && m.recoverAt > 0 {
		last := m.seconds[n-1]
		d := sum(lastOverloaded+1, n)
		fmt.Fprintf(&sb, "After it healed (%s) its limiter kept %d requests from it while its limit grew back; in the last second it got %s, against an even share of 33.3%%.\n",
			span(lastOverloaded+1, n), d.badThrottled, share(last.badSent, last.sent))
	}
	return sb.String()
}
