package nodeinterop

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/peer"
)

// sluiceService is the service the Sluice servers here serve.
const sluiceService = "sluicekv"

// rdKey carries an inbound call's routing delegate to its handler.
type rdKey struct{}

// served is what the Sluice server's handlers report of a call.
type served struct {
	Arg3   string `json:"arg3,omitempty"`
	Caller string `json:"caller"`
	RD     string `json:"rd"`
	Class  string `json:"class"`
	TTLms  int64  `json:"ttlMs"` // the time left of the call's deadline
}

// servedOf reports the call a handler serves with ctx.
func servedOf(ctx context.Context, caller string) served {
	s := served{Caller: caller, Class: criticality.FromContext(ctx).String()}
	s.RD, _ = ctx.Value(rdKey{}).(string)
	if d, ok := ctx.Deadline(); ok {
		s.TTLms = time.Until(d).Milliseconds()
	}
	return s
}

// startSluiceServer starts a Sluice server of sluiceService on 127.0.0.1
// with opts, serving:
//
//	echo   raw: arg2 back, arg3 the JSON of a served
//	jecho  JSON: the body and the served, the request's headers back
//	       with "served-by: sluice" added
//	busy   raw: Busy, with a pushback hint (BusyAfter)
//	fail   raw: an error of the handler's own (UnexpectedError on the wire)
//	block  raw: sends on entered, then waits for release
func startSluiceServer(t *testing.T, entered chan<- struct{}, release <-chan struct{}, opts ...channel.Option) *channel.Channel {
	t.Helper()
	ch, err := channel.New(sluiceService, append(opts, channel.WithInboundMiddleware(func(ctx context.Context, in *channel.Inbound, next func(context.Context) error) error {
		return next(context.WithValue(ctx, rdKey{}, in.RoutingDelegate))
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.RegisterRaw("echo", func(ctx context.Context, req *channel.RawRequest) (*channel.RawResponse, error) {
		s := servedOf(ctx, req.Caller)
		s.Arg3 = string(req.Arg3)
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		return &channel.RawResponse{Arg2: req.Arg2, Arg3: b}, nil
	}))
	must(ch.RegisterRaw("busy", func(context.Context, *channel.RawRequest) (*channel.RawResponse, error) {
		return nil, channel.BusyAfter(50*time.Millisecond, "sluice server is busy")
	}))
	must(ch.RegisterRaw("fail", func(context.Context, *channel.RawRequest) (*channel.RawResponse, error) {
		return nil, errors.New("sluice handler failed")
	}))
	must(ch.RegisterRaw("block", func(ctx context.Context, _ *channel.RawRequest) (*channel.RawResponse, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &channel.RawResponse{Arg3: []byte("released")}, nil
	}))
	must(ch.RegisterJSON(map[string]any{"jecho": func(ctx tjson.Context, body map[string]any) (map[string]any, error) {
		headers := map[string]string{"served-by": "sluice"}
		for k, v := range ctx.Headers() {
			headers[k] = v
		}
		ctx.SetResponseHeaders(headers)
		return map[string]any{"body": body, "served": servedOf(ctx, tchannel.CurrentCall(ctx).CallerName())}, nil
	}}))
	must(ch.ListenAndServe("127.0.0.1:0"))
	return ch
}

// TestNodeClientSluiceServer: a Node client's raw and JSON calls reach a
// Sluice server with their arguments, caller name, headers, routing
// delegate and TTL, and come back with the server's; a class mark a Node
// client forges claims nothing; the server's Busy (with Sluice's pushback
// hint in its message) and its handler's failures reach the Node client
// as the Busy and UnexpectedError codes; and a server that reports its
// load to Sluice clients sends the Node client nothing it cannot read.
func TestNodeClientSluiceServer(t *testing.T) {
	srv := startSluiceServer(t, nil, nil, channel.WithUtilisation(func() float64 { return 0.5 }))
	node := startNodeClient(t)
	hp := srv.HostPort()

	t.Run("raw", func(t *testing.T) {
		r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "echo", As: "raw", Arg2: "raw-arg2", Arg3: "raw-arg3", TimeoutMS: 1500})
		if !r.OK || r.Err != nil {
			t.Fatalf("got ok=%v err=%+v, want an ok answer", r.OK, r.Err)
		}
		if r.Arg2 != "raw-arg2" {
			t.Errorf("arg2 came back as %q, want %q", r.Arg2, "raw-arg2")
		}
		var s served
		if err := json.Unmarshal([]byte(r.Arg3), &s); err != nil {
			t.Fatalf("arg3 %q: %v", r.Arg3, err)
		}
		if s.Arg3 != "raw-arg3" || s.Caller != "node-client" || s.RD != "" || s.Class != "critical" {
			t.Errorf("the Sluice server served arg3 %q, caller %q, rd %q, class %s; want %q, %q, none, critical", s.Arg3, s.Caller, s.RD, s.Class, "raw-arg3", "node-client")
		}
		if s.TTLms <= 0 || s.TTLms > 1500 {
			t.Errorf("the handler's deadline was %d ms away, want within the Node client's timeout (0, 1500]", s.TTLms)
		}
		if r.Headers["as"] != "raw" {
			t.Errorf("the answer's transport headers %v, want as=raw", r.Headers)
		}
	})

	t.Run("json", func(t *testing.T) {
		r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "jecho", As: "json", Head: map[string]string{"tenant": "blue"}, Body: map[string]any{"key": "k"}, RD: "relay"})
		if !r.OK || r.Err != nil {
			t.Fatalf("got ok=%v err=%+v, want an ok answer", r.OK, r.Err)
		}
		if r.Head["tenant"] != "blue" || r.Head["served-by"] != "sluice" {
			t.Errorf("response headers %v, want tenant=blue (echoed) and served-by=sluice", r.Head)
		}
		var body struct {
			Body   map[string]any `json:"body"`
			Served served         `json:"served"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
		if body.Body["key"] != "k" || body.Served.Caller != "node-client" || body.Served.RD != "relay" || body.Served.Class != "critical" {
			t.Errorf("the Sluice server served %v as %+v; want key k, caller node-client, rd relay, class critical", body.Body, body.Served)
		}
	})

	// A Node client is not a Sluice peer: a mark in its routing delegate
	// claims no class (it is served as Critical).
	t.Run("forged mark", func(t *testing.T) {
		r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "echo", As: "raw", RD: "relay\x00" + "1"})
		var s served
		if err := json.Unmarshal([]byte(r.Arg3), &s); err != nil || !r.OK {
			t.Fatalf("got ok=%v err=%+v arg3 %q (%v), want an ok answer", r.OK, r.Err, r.Arg3, err)
		}
		if s.Class != "critical" {
			t.Errorf("a Node call whose routing delegate holds a mark was served as %s, want critical", s.Class)
		}
	})

	t.Run("busy", func(t *testing.T) {
		for _, as := range []string{"raw", "json"} {
			r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "busy", As: as, Body: map[string]any{}})
			if r.errCode() != "Busy" || !strings.HasPrefix(r.Err.Message, "sluice server is busy") {
				t.Errorf("%s: got %+v, want code Busy with the handler's message", as, r.Err)
			}
		}
	})

	t.Run("handler failure", func(t *testing.T) {
		r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "fail", As: "raw"})
		if r.errCode() != "UnexpectedError" {
			t.Errorf("got %+v, want code UnexpectedError", r.Err)
		}
	})

	// The server reports its load (WithUtilisation) on Sluice clients'
	// connections only, every 8 answers: on the Node client's, any frame
	// tchannel-node does not know would break the calls after it.
	t.Run("load reports", func(t *testing.T) {
		ids := make([]int, 40)
		for i := range ids {
			ids[i] = node.Send(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "echo", As: "raw", Arg3: "many"})
		}
		for i, id := range ids {
			if r := node.Await(t, id); !r.OK || r.Err != nil {
				t.Fatalf("call %d: got ok=%v err=%+v, want an ok answer", i, r.OK, r.Err)
			}
		}
	})
}

// TestNodeClientShedBySluiceServer: a Sluice server that sheds (here at one
// request in flight) answers a Node client's call past its limit Busy, its
// message naming the limit as Sluice clients read it; the call in flight
// is then answered.
func TestNodeClientShedBySluiceServer(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := startSluiceServer(t, entered, release, channel.WithShedding(channel.ShedConfig{MaxInFlight: 1}))
	node := startNodeClient(t)
	hp := srv.HostPort()

	first := node.Send(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "block", As: "raw", TimeoutMS: int(waitLimit / time.Millisecond)})
	select {
	case <-entered:
	case <-time.After(waitLimit):
		t.Fatalf("the first call did not reach the handler within %v", waitLimit)
	}
	r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "block", As: "raw"})
	if r.errCode() != "Busy" || !strings.HasPrefix(r.Err.Message, "server overloaded") {
		t.Errorf("the call past the limit: got %+v, want code Busy, message starting %q", r.Err, "server overloaded")
	}
	t.Logf("the Busy message a Node client read: %q", r.Err.Message)
	close(release)
	if r := node.Await(t, first); !r.OK || r.Arg3 != "released" {
		t.Errorf("the call in flight: got ok=%v arg3 %q err %+v, want an ok answer %q", r.OK, r.Arg3, r.Err, "released")
	}
}

// slowService is how long the "slow" method of
// TestNodeClientDeadlineRefusal takes: its service time, not a wait for
// anything.
const slowService = time.Second

// TestNodeClientDeadlineRefusal: a Sluice server reads a Node client's TTL
// as the call's deadline: once it knows a method takes slowService, a Node
// call that gives it less is refused before its handler runs, and reaches
// the Node client as Busy (the refusal's notes in the message, which Node
// ignores); a call that gives it enough is served.
func TestNodeClientDeadlineRefusal(t *testing.T) {
	srv := startSluiceServer(t, nil, nil)
	var served atomic.Int64
	if err := srv.RegisterRaw("slow", func(ctx context.Context, _ *channel.RawRequest) (*channel.RawResponse, error) {
		served.Add(1)
		select {
		case <-time.After(slowService):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &channel.RawResponse{Arg3: []byte("done")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The server estimates a method's service time from its first
	// latency.MinSamples (32) calls: a Sluice client makes them at once.
	cl, err := srv.NewClient(sluiceService)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	const warm = 32
	errs := make(chan error, warm)
	for i := 0; i < warm; i++ {
		go func() {
			_, err := cl.CallRaw(ctxFor(t), "slow", nil, nil)
			errs <- err
		}()
	}
	for i := 0; i < warm; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("warming up: %v", err)
		}
	}

	node := startNodeClient(t)
	hp := srv.HostPort()
	before := served.Load()
	r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "slow", As: "raw", TimeoutMS: int(slowService / 2 / time.Millisecond)})
	if r.errCode() != "Busy" || !strings.HasPrefix(r.Err.Message, "server refused:") {
		t.Errorf("a call with half the service time left: got %+v, want code Busy, message starting %q", r.Err, "server refused:")
	} else {
		t.Logf("the refusal a Node client read: %q", r.Err.Message)
	}
	if got := served.Load() - before; got != 0 {
		t.Errorf("the refused call reached the handler (%d calls)", got)
	}
	r = node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "slow", As: "raw", TimeoutMS: int(10 * slowService / time.Millisecond)})
	if !r.OK || r.Arg3 != "done" {
		t.Errorf("a call with ten times the service time left: got ok=%v arg3 %q err %+v, want an ok answer %q", r.OK, r.Arg3, r.Err, "done")
	}
}

// TestNodeClientSluiceServerShutdown: a Sluice server's Shutdown tells its
// Sluice clients it is leaving (a drain signal) and tells a Node client
// nothing: the Node client's call in flight is answered, its new calls
// within the grace are served on the same connection, and Shutdown ends
// once both have gone quiet.
func TestNodeClientSluiceServerShutdown(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := startSluiceServer(t, entered, release, channel.WithShutdown(channel.ShutdownConfig{Grace: waitLimit, Quiet: 100 * time.Millisecond}))
	hp := srv.HostPort()

	sluice, err := channel.New("sluice-client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sluice.Close)
	cl, err := sluice.NewClient(sluiceService)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.AddPeer(hp); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CallRaw(ctxFor(t), "echo", nil, nil); err != nil {
		t.Fatalf("the Sluice client's call: %v", err)
	}

	node := startNodeClient(t)
	first := node.Send(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "block", As: "raw", TimeoutMS: int(waitLimit / time.Millisecond)})
	testwait.Recv(t, entered, "the Node client's call to reach the handler")

	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctxFor(t)) }()
	// The Sluice client hears that the server is leaving: its signal has
	// been sent, on the signalled connection only.
	testwait.Until(t, "the Sluice client to see its server leaving", func() bool {
		p := cl.Peers()
		return len(p) == 1 && p[0].State == peer.TransientFailure
	})

	r := node.Call(t, nodeCall{HostPort: hp, Service: sluiceService, Method: "echo", As: "raw", Arg3: "during the grace"})
	if !r.OK || r.Err != nil {
		t.Errorf("a Node call within the grace: got ok=%v err=%+v, want an ok answer", r.OK, r.Err)
	}
	close(release)
	if r := node.Await(t, first); !r.OK || r.Arg3 != "released" {
		t.Errorf("the Node call in flight at Shutdown: got ok=%v arg3 %q err %+v, want an ok answer %q", r.OK, r.Arg3, r.Err, "released")
	}
	if err := testwait.Recv(t, shut, "Shutdown to end"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
