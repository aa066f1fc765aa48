package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/peer"
	"golang.org/x/time/rate"
)

// demoConfig shapes the demo's story: one of three servers is overloaded
// until recoverAt, then heals.
type demoConfig struct {
	seconds     int
	rps         int
	capacity    float64 // what the overloaded server handles per second
	recoverAt   int
	callTimeout time.Duration
}

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := demoConfig{callTimeout: 500 * time.Millisecond}
	fs.IntVar(&cfg.seconds, "seconds", 24, "how long the demo runs (1..30)")
	fs.IntVar(&cfg.rps, "rps", 300, "requests per second the client sends (1..5000)")
	fs.Float64Var(&cfg.capacity, "capacity", 20, "requests per second the overloaded server can take (0 < capacity <= 100000)")
	fs.IntVar(&cfg.recoverAt, "recover-at", 6, "second at which the overloaded server heals (0: never)")
	if !parseFlags(fs, args) {
		return 2
	}
	switch {
	case cfg.seconds < 1 || cfg.seconds > 30:
		fmt.Fprintf(stderr, "sluice demo: --seconds is %d, must be 1..30\n", cfg.seconds)
		return 2
	case cfg.rps < 1 || cfg.rps > 5000:
		fmt.Fprintf(stderr, "sluice demo: --rps is %d, must be 1..5000\n", cfg.rps)
		return 2
	case !(cfg.capacity > 0 && cfg.capacity <= 100000): // also rejects NaN and +Inf
		fmt.Fprintf(stderr, "sluice demo: --capacity is %v, must be a number in (0, 100000]\n", cfg.capacity)
		return 2
	case cfg.recoverAt < 0:
		fmt.Fprintf(stderr, "sluice demo: --recover-at is %d, must be >= 0\n", cfg.recoverAt)
		return 2
	}
	if err := runDemo(context.Background(), cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		return 1
	}
	return 0
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

func runDemo(ctx context.Context, cfg demoConfig, w io.Writer) error {
	var servers []*demoServer
	defer func() {
		for _, s := range servers {
			s.ch.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		s, err := startDemoServer(cfg.capacity)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	bad := servers[2]
	bad.overloaded.Store(true)

	client, err := channel.New("demo-client")
	if err != nil {
		return err
	}
	defer client.Close()
	for _, s := range servers {
		if err := client.AddPeer("kv", s.ch.HostPort()); err != nil {
			return err
		}
	}

	heal := "never heals"
	if cfg.recoverAt > 0 {
		heal = fmt.Sprintf("heals at second %d", cfg.recoverAt)
	}
	fmt.Fprintf(w, "sluice demo: 3 TChannel servers on 127.0.0.1; %s takes only %v req/s and answers Busy above that, then %s.\n",
		bad.ch.HostPort(), cfg.capacity, heal)
	fmt.Fprintf(w, "A Sluice channel sends %d req/s for %d s. Each second, per peer: requests sent, busy answers, requests its limiter refused (sent elsewhere), its limit and its connection's state.\n\n",
		cfg.rps, cfg.seconds)
	if err := client.Connect(ctx, "kv"); err != nil {
		return err
	}
	fmt.Fprintf(w, "%4s  %-21s %6s %6s %10s %9s  %s\n", "sec", "peer", "sent", "busy", "throttled", "limit", "connection")

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
				_, err := client.CallRaw(cctx, "kv", "get", nil, []byte("k"))
				var ce *channel.CallError
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.As(err, &ce):
					failOther.Add(1)
				case ce.Code == codes.Throttled:
					failThrottled.Add(1)
				case ce.Code == codes.Busy:
					failBusy.Add(1)
				default:
					failOther.Add(1)
				}
			}()
		case <-second.C:
			for _, p := range client.Peers("kv") {
				q := prev[p.HostPort]
				mark := ""
				if p.HostPort == bad.ch.HostPort() && bad.overloaded.Load() {
					mark = "  <- overloaded"
				}
				fmt.Fprintf(w, "%4d  %-21s %6d %6d %10d %9d  %s%s\n", sec, p.HostPort,
					p.Sent-q.Sent, p.Busy-q.Busy, p.Throttled-q.Throttled, int64(p.Limit), p.State, mark)
				prev[p.HostPort] = p
			}
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
	for _, p := range client.Peers("kv") {
		fmt.Fprintf(w, "  %-21s sent %6d  busy %5d  throttled %6d  final limit %d  %s\n", p.HostPort, p.Sent, p.Busy, p.Throttled, int64(p.Limit), p.State)
	}
	if cfg.recoverAt > 0 && cfg.recoverAt < cfg.seconds {
		fmt.Fprintf(w, "The overloaded server's limit fell within two seconds of its first Busy answers and the other two took its traffic; after it healed at second %d its limit grew x4 per second.\n", cfg.recoverAt)
	}
	return nil
}
