package load

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
)

func TestPoolConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  PoolConfig
		want string
	}{
		{PoolConfig{}, "PoolConfig.Workers is 0, must be in [1, 100000]"},
		{PoolConfig{Workers: MaxWorkers + 1}, "PoolConfig.Workers is 100001"},
		{PoolConfig{Workers: 1, MaxQueue: -1}, "PoolConfig.MaxQueue is -1, must be >= 0"},
	} {
		if _, err := NewPool(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPool(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// A pool of one worker and a queue of two: the first request holds the
// worker, two wait, the fourth is shed at once; when their caller gives
// up, the three are abandoned, and the counts and the in-flight integral
// say so.
func TestPoolShedsBeyondItsQueue(t *testing.T) {
	p, err := NewPool(PoolConfig{Workers: 1, MaxQueue: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := p.Stats()
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := p.Serve(ctx, time.Hour)
			errs <- err
		}()
		testwait.Until(t, "the pool to hold the request", func() bool { return p.Stats().InFlight == int64(i+1) })
	}
	if held, err := p.Serve(ctx, time.Hour); !errors.Is(err, ErrShed) || held != 0 {
		t.Fatalf("the fourth request: Serve = %v, %v; want 0, ErrShed", held, err)
	}
	cancel()
	for range 3 {
		if err := testwait.Recv(t, errs, "an abandoned request to return"); !errors.Is(err, context.Canceled) {
			t.Errorf("an abandoned request: Serve = %v, want context.Canceled", err)
		}
	}
	s := p.Stats()
	if s.InFlight != 0 || s.Peak != 3 || s.Shed != 1 || s.Queued != 2 || s.Abandoned != 3 || s.Served != 0 {
		t.Errorf("stats %+v: want 0 in flight, peak 3, 1 shed, 2 queued, 3 abandoned, 0 served", s)
	}
	if m := MeanInFlight(start, s); !(m > 0 && m <= 3) {
		t.Errorf("mean in flight %v, want in (0, 3]", m)
	}
	p.ResetPeak()
	if s := p.Stats(); s.Peak != 0 {
		t.Errorf("after ResetPeak with nothing in flight, peak %d, want 0", s.Peak)
	}
}

// Unbounded, the queue takes every request, and a pool of N workers of d
// serves k requests in no less than k/N x d; each held its worker for d at
// least, and, for those that waited, less than their time in Serve.
func TestPoolServesAll(t *testing.T) {
	const workers, d, requests = 2, 5 * time.Millisecond, 10
	p, err := NewPool(PoolConfig{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	waited := 0 // requests that held their worker for less than their time in Serve
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			held, err := p.Serve(context.Background(), d)
			took := time.Since(t0)
			if err != nil || held < d || held > took {
				t.Errorf("Serve = %v, %v in %v; want nil, held for %v to %v", held, err, took, d, took)
			}
			mu.Lock()
			defer mu.Unlock()
			if took-held >= d/2 {
				waited++
			}
		}()
	}
	wg.Wait()
	if waited < requests/2 {
		t.Errorf("%d of %d requests held their worker at least %v less than they spent in Serve; want the queued ones, most", waited, requests, d/2)
	}
	if took, least := time.Since(start), requests/workers*d; took < least {
		t.Errorf("%d requests on %d workers of %v took %v, less than %v", requests, workers, d, took, least)
	}
	if s := p.Stats(); s.Served != requests || s.Peak > requests || s.Queued < requests-workers || s.Shed != 0 {
		t.Errorf("stats %+v: want %d served, none shed, at least %d queued", s, requests, requests-workers)
	}
}

// A request that finds a worker free holds it for its time and the
// timer's lateness, all of its time in Serve: the pool's schedule does not
// shorten it (under a millisecond, Go's timers on Linux fire after about
// 1.1 ms), and Serve says so. The best of five is within 100 µs of the
// time in Serve (the others may have been descheduled on a busy machine).
func TestPoolHeldTimeIsServed(t *testing.T) {
	p, err := NewPool(PoolConfig{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	const d = 200 * time.Microsecond
	best := time.Hour
	for range 5 {
		t0 := time.Now()
		held, err := p.Serve(context.Background(), d)
		took := time.Since(t0)
		if err != nil || held < d || held > took {
			t.Errorf("Serve(%v) = %v, %v in %v; want nil, held for %v to %v", d, held, err, took, d, took)
		}
		best = min(best, took-held)
		time.Sleep(time.Millisecond) // the worker is free again by its schedule
	}
	if best > 100*time.Microsecond {
		t.Errorf("the time in Serve less the time held: %v at best, want under 100µs", best)
	}
}

// Client sends each call through the Client it names, and Context makes
// each call with the context it gives: here every third call goes
// through the second of two Channels, and every fifth is made with a
// context already cancelled.
func TestRunClientAndContext(t *testing.T) {
	s := startServers(t, 1, ServerConfig{Service: "kv", Method: "get"})
	cls := startClients(t, s, "kv", 2)
	type key struct{}
	r, err := RunClients(context.Background(), cls, Config{Method: "get", RPS: 1000, Calls: 60, Record: true,
		Client: func(i int) int {
			if i%3 == 0 {
				return 1
			}
			return 0
		},
		Context: func(ctx context.Context, i int) context.Context {
			if i%5 != 0 {
				return context.WithValue(ctx, key{}, i)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			return cctx
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Records) != 60 {
		t.Fatalf("%d records, want 60", len(r.Records))
	}
	for i, rec := range r.Records {
		if cancelled := rec.Code != ""; cancelled != (i%5 == 0) {
			t.Errorf("call %d: code %q; want a failure exactly for every fifth call, made cancelled", i, rec.Code)
		}
	}
	// Calls 0, 3, ..., 57 through the second Channel, of which those
	// not cancelled (not 0, 15, 30, 45) were sent: 16; the first sent 32.
	var sent [2]uint64
	for k, cl := range cls {
		for _, c := range cl.Peers() {
			sent[k] += c.Sent
		}
	}
	if sent != [2]uint64{32, 16} {
		t.Errorf("sent %v through the two Channels, want [32 16]", sent)
	}
}

// Vary gives each call its own request, and Record keeps every call with
// the peer that answered it, in arrival order.
func TestRunVaryAndRecord(t *testing.T) {
	s := startServers(t, 2, ServerConfig{Service: "kv", Method: "get"})
	c := startClient(t, s, "kv", nil)
	var got []int
	r, err := Run(context.Background(), c, Config{Method: "get", RPS: 1000, Calls: 50, Record: true,
		Vary: func(i int) (*channel.Request, []channel.CallOption) {
			got = append(got, i)
			return &channel.Request{Format: "raw", Arg3: []byte{byte(i)}}, []channel.CallOption{channel.WithShardKey("k")}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 || got[0] != 0 || got[49] != 49 {
		t.Errorf("Vary was called for %v, want 0..49 in order", got)
	}
	if len(r.Records) != 50 || r.Start.IsZero() {
		t.Fatalf("%d records, start %v; want 50 and a start", len(r.Records), r.Start)
	}
	peers := map[string]bool{}
	for _, hp := range s.HostPorts() {
		peers[hp] = true
	}
	for i, rec := range r.Records {
		if rec.Code != "" || !peers[rec.Peer] || rec.Latency <= 0 || rec.At < 0 {
			t.Fatalf("record %d: %+v; want ok, from one of %v, after the start", i, rec, s.HostPorts())
		}
	}
}
