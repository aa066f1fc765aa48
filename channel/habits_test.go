package channel

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/retry"
)

// builtCtx returns the context cb builds, with a 2 s timeout.
func builtCtx(t testing.TB, cb *tchannel.ContextBuilder) tchannel.ContextWithHeaders {
	t.Helper()
	ctx, cancel := cb.SetTimeout(2 * time.Second).Build()
	t.Cleanup(cancel)
	return ctx
}

// Sluice finds tchannel-go's context keys and reads its call parameters:
// if a tchannel-go upgrade changes them, this fails (and the options of a
// ContextBuilder are ignored by routing again).
func TestTChannelContextProbe(t *testing.T) {
	if tchCtx().paramsKey == nil || tchCtx().headersKey == nil {
		t.Fatalf("tchannel-go's context layout was not recognised: %+v", tchCtx())
	}
	ctx := builtCtx(t, tchannel.NewContextBuilder(0).SetShardKey("k").SetRoutingDelegate("rd").
		AddHeader("h", "v"))
	got := tchCtx().read(ctx)
	want := ctxCallOptions{set: true, opts: tchannel.CallOptions{ShardKey: "k", RoutingDelegate: "rd"}}
	if got != want {
		t.Errorf("read = %+v, want %+v", got, want)
	}
	if h := tchCtx().headers(context.WithValue(ctx, rdKey{}, 1)); !maps.Equal(h, map[string]string{"h": "v"}) {
		t.Errorf("headers of a wrapped context = %v, want h=v", h)
	}
	// Hidden, BeginCall sees no options; tracing stays disabled if it was.
	off := builtCtx(t, tchannel.NewContextBuilder(0).SetShardKey("k").DisableTracing())
	if c := tchCtx().read(tchCtx().hide(off, tchCtx().read(off).hideFor())); c.set || !c.tracingOff {
		t.Errorf("hidden: %+v, want no options and tracing off", c)
	}
	for name, ctx := range map[string]context.Context{
		"Background":       context.Background(),
		"WithoutHeaders":   tchannel.WithoutHeaders(ctx),
		"no CallOptions":   builtCtx(t, tchannel.NewContextBuilder(0)),
		"json.NewContext":  tjson.Wrap(context.Background()),
		"WithValue on nil": context.WithValue(context.Background(), tchCtx().paramsKey, (*int)(nil)),
	} {
		if c := tchCtx().read(ctx); c.set {
			t.Errorf("%s: read %+v, want no options", name, c)
		}
	}
}

// Reading a context that carries no call options allocates nothing:
// neither a plain one nor a handler's (tchannel-go's parameters, no
// options).
func TestTChannelContextReadAllocatesNothing(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"plain":      ctxTimeout(t),
		"parameters": builtCtx(t, tchannel.NewContextBuilder(0)),
		"options":    builtCtx(t, tchannel.NewContextBuilder(0).SetShardKey("k")),
	} {
		var o *callOptions
		if n := testing.AllocsPerRun(100, func() {
			if _, _, err := o.transportFor(ctx, tchannel.Raw); err != nil {
				t.Fatal(err)
			}
		}); name != "options" && n != 0 {
			t.Errorf("%s: transportFor allocates %v times, want 0", name, n)
		}
	}
}

// tchannel-go's habit: a shard key set through the ContextBuilder routes
// the call to the key's home, as channel.WithShardKey does, raw and JSON;
// WithShardKey given too wins.
func TestContextBuilderShardKeyRoutes(t *testing.T) {
	servers := []*testServer{startServer(t), startServer(t), startServer(t)}
	client, _, _ := startClient(t, servers...)
	waitAllReady(t, client, servers)
	kv := to(client, "kv")
	homeOf := func(key string) string {
		t.Helper()
		h, err := kv.ShardHome(key)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	home := homeOf("user-42")
	other := ""
	for _, k := range []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6", "user-7", "user-8"} {
		if homeOf(k) != home {
			other = k
			break
		}
	}
	if other == "" {
		t.Fatal("no key among 8 has a home other than user-42's")
	}
	counts := func(f func(i int)) map[string]int64 {
		before := map[string]int64{}
		for _, s := range servers {
			before[s.ch.HostPort()] = s.received.Load()
		}
		for i := 0; i < 12; i++ {
			f(i)
		}
		got := map[string]int64{}
		for _, s := range servers {
			if n := s.received.Load() - before[s.ch.HostPort()]; n != 0 {
				got[s.ch.HostPort()] = n
			}
		}
		return got
	}
	ctx := builtCtx(t, tchannel.NewContextBuilder(0).SetShardKey("user-42"))
	raw12 := counts(func(int) {
		if _, err := kv.CallRaw(ctx, "echo", nil, []byte("x")); err != nil {
			t.Fatal(err)
		}
	})
	if want := map[string]int64{home: 12}; !maps.Equal(raw12, want) {
		t.Errorf("12 raw calls with the ContextBuilder's shard key went %v, want all to its home %s", raw12, home)
	}
	json12 := counts(func(int) {
		var res echoRes
		if err := kv.CallJSON(ctx, "get", &echoReq{Key: "k"}, &res); err != nil {
			t.Fatal(err)
		}
		if res.Server != home {
			t.Fatalf("a JSON call reached %s, want the home %s", res.Server, home)
		}
	})
	if want := map[string]int64{home: 12}; !maps.Equal(json12, want) {
		t.Errorf("12 JSON calls went %v, want all to %s", json12, home)
	}
	// A context derived from the built one keeps its options, as
	// tchannel-go's BeginCall reads them there too.
	derived := criticality.WithClass(ctx, criticality.Sheddable)
	if got := counts(func(int) {
		if _, err := kv.CallRaw(derived, "echo", nil, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}); !maps.Equal(got, map[string]int64{home: 12}) {
		t.Errorf("12 calls with a derived context went %v, want all to %s", got, home)
	}
	otherHome := homeOf(other)
	if got := counts(func(int) {
		if _, err := kv.CallRaw(ctx, "echo", nil, []byte("x"), WithShardKey(other)); err != nil {
			t.Fatal(err)
		}
	}); !maps.Equal(got, map[string]int64{otherHome: 12}) {
		t.Errorf("12 calls with WithShardKey(%s) over the context's user-42 went %v, want all to %s", other, got, otherHome)
	}
}

// The transport headers a ContextBuilder sets reach a plain tchannel-go
// server as tchannel-go itself sends them (the same context on a plain
// tchannel-go client), in every arg scheme; the arg scheme is the call's;
// Sluice's options win where both set a header.
func TestContextBuilderTransportReachesAPlainServer(t *testing.T) {
	f := startPlainFleet(t, 1, nil)
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(f.hostPorts[0]); err != nil {
		t.Fatal(err)
	}
	cb := tchannel.NewContextBuilder(0)
	cb.CallOptions = &tchannel.CallOptions{CallerName: "proxy-for-web", Format: tchannel.Thrift}
	ctx := builtCtx(t, cb.SetShardKey("user-42").SetRoutingKey("canary").SetRoutingDelegate("kv-router"))

	plain := plainClient(t, nil)
	if _, _, _, err := raw.Call(ctx, plain, f.hostPorts[0], "kv", "echo", nil, nil); err != nil {
		t.Fatalf("tchannel-go raw.Call: %v", err)
	}
	if _, err := kv.CallRaw(ctx, "echo", nil, []byte("x")); err != nil {
		t.Fatalf("CallRaw: %v", err)
	}
	// A class other than Critical is marked in the routing delegate; a
	// plain server never sees the mark.
	if _, err := kv.CallRaw(criticality.WithClass(ctx, criticality.Sheddable), "echo", nil, []byte("x")); err != nil {
		t.Fatalf("CallRaw, sheddable: %v", err)
	}
	if err := kv.CallJSON(ctx, "echo", map[string]string{}, nil); err != nil {
		t.Fatalf("CallJSON: %v", err)
	}
	if _, err := kv.Call(ctx, "echo", &Request{Format: tchannel.Thrift}, WithShardKey("mine"), WithRoutingKey("blue"),
		WithRoutingDelegate("my-router"), WithCallerName("me")); err != nil {
		t.Fatalf("Call with options: %v", err)
	}
	got := f.seen()
	if len(got) != 5 {
		t.Fatalf("the server saw %d requests, want 5: %+v", len(got), got)
	}
	asTChannel := got[0]
	want := transportSeen{Format: tchannel.Thrift, Caller: "proxy-for-web", ShardKey: "user-42", RoutingKey: "canary", RoutingDelegate: "kv-router"}
	if asTChannel != want {
		t.Fatalf("tchannel-go sent %+v, want %+v", asTChannel, want)
	}
	withFormat := func(s transportSeen, f tchannel.Format) transportSeen { s.Format = f; return s }
	for i, w := range []transportSeen{
		withFormat(asTChannel, tchannel.Raw),
		withFormat(asTChannel, tchannel.Raw),
		withFormat(asTChannel, tchannel.JSON),
		{Format: tchannel.Thrift, Caller: "me", ShardKey: "mine", RoutingKey: "blue", RoutingDelegate: "my-router"},
	} {
		if got[i+1] != w {
			t.Errorf("request %d: the server saw %+v, want %+v", i+1, got[i+1], w)
		}
	}
}

// A routing delegate set through the ContextBuilder reaches a Sluice
// server's handler as given, with the call's class beside it: the class
// mark is added to it as to WithRoutingDelegate's.
func TestContextBuilderRoutingDelegateKeepsTheClass(t *testing.T) {
	srv := reportingClassServer(t, "kv")
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := criticality.WithClass(builtCtx(t, tchannel.NewContextBuilder(0).SetRoutingDelegate("relay")), criticality.Sheddable)
	if got := callString(t, ctx, kv, "rd"); got != "relay" {
		t.Errorf("the handler saw routing delegate %q, want relay", got)
	}
	if got := callString(t, ctx, kv, "class"); got != "sheddable" {
		t.Errorf("the handler saw class %q, want sheddable", got)
	}
}

// A ContextBuilder's header over TChannel's limits fails the call with
// BAD_REQUEST naming it, as WithShardKey's does, and nothing is sent.
func TestContextBuilderTransportLimits(t *testing.T) {
	f := startPlainFleet(t, 1, nil)
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(f.hostPorts[0]); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cb   *tchannel.ContextBuilder
		want []string
	}{
		{tchannel.NewContextBuilder(0).SetShardKey(strings.Repeat("k", 256)), []string{"SetShardKey", "256 bytes", "255"}},
		{tchannel.NewContextBuilder(0).SetRoutingKey(strings.Repeat("k", 256)), []string{"SetRoutingKey", "256 bytes"}},
		{tchannel.NewContextBuilder(0).SetRoutingDelegate(strings.Repeat("d", 254)), []string{"SetRoutingDelegate", "at most 253 bytes"}},
		{tchannel.NewContextBuilder(0).SetRoutingDelegate("a\x00b"), []string{"SetRoutingDelegate", "1 NUL"}},
	} {
		_, err := kv.CallRaw(builtCtx(t, tc.cb), "echo", nil, []byte("x"))
		var ce *CallError
		if !errors.As(err, &ce) || ce.Code != codes.BadRequest || ce.Attempts != 0 {
			t.Errorf("error %v, want BAD_REQUEST after 0 attempts", err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
	}
	// The option replaces the context's value: the context's is not checked.
	ctx := builtCtx(t, tchannel.NewContextBuilder(0).SetShardKey(strings.Repeat("k", 256)))
	if _, err := kv.CallRaw(ctx, "echo", nil, []byte("x"), WithShardKey("k")); err != nil {
		t.Errorf("WithShardKey over a long context key: %v", err)
	}
	if got := f.seen(); len(got) != 1 || got[0].ShardKey != "k" {
		t.Errorf("the server saw %+v, want one request with shard key k", got)
	}
}

// tchannel-go's habit: JSON headers through json.WithHeaders (or a
// ContextBuilder) reach the handler, as tchannel-go's json.Client sends
// them; WithHeaders wins on a name both set; the attempt count is not
// taken from the context; the caller's maps are untouched.
func TestJSONHeadersFromContext(t *testing.T) {
	s := startServer(t)
	if err := s.ch.RegisterJSON(map[string]any{"headers": func(ctx tjson.Context, _ map[string]string) (map[string]string, error) {
		return ctx.Headers(), nil
	}}); err != nil {
		t.Fatal(err)
	}
	client, _, _ := startClient(t, s)
	kv := to(client, "kv")
	call := func(ctx context.Context, opts ...CallOption) map[string]string {
		t.Helper()
		var h map[string]string
		if err := kv.CallJSON(ctx, "headers", map[string]string{}, &h, opts...); err != nil {
			t.Fatal(err)
		}
		return h
	}
	mine := map[string]string{"who": "me", "tenant": "a"}
	for name, ctx := range map[string]context.Context{
		"json.WithHeaders":          tjson.WithHeaders(ctxTimeout(t), mine),
		"ContextBuilder":            builtCtx(t, tchannel.NewContextBuilder(0).SetHeaders(mine)),
		"wrapped by criticality":    criticality.WithClass(tjson.WithHeaders(ctxTimeout(t), mine), criticality.Sheddable),
		"ContextBuilder, AddHeader": builtCtx(t, tchannel.NewContextBuilder(0).AddHeader("who", "me").AddHeader("tenant", "a")),
	} {
		if got := call(ctx); !maps.Equal(got, mine) {
			t.Errorf("%s: the handler saw %v, want %v", name, got, mine)
		}
	}
	ctx := tjson.WithHeaders(ctxTimeout(t), map[string]string{"who": "me", retry.AttemptsHeader: "2"})
	got := call(ctx, WithHeaders(map[string]string{"who": "option"}))
	if want := map[string]string{"who": "option"}; !maps.Equal(got, want) {
		t.Errorf("with WithHeaders: the handler saw %v, want %v", got, want)
	}
	if want := map[string]string{"who": "me", retry.AttemptsHeader: "2"}; !maps.Equal(ctx.Headers(), want) {
		t.Errorf("the context's headers became %v, want %v", ctx.Headers(), want)
	}
	if got := call(tjson.WithHeaders(ctxTimeout(t), map[string]string{retry.AttemptsHeader: "1"})); len(got) != 0 {
		t.Errorf("the handler saw %v, want no headers", got)
	}
	// The response headers are not set on the context (as tchannel-go's
	// json.Client); ResponseHeaders stores them.
	var rh map[string]string
	jctx := tjson.WithHeaders(ctxTimeout(t), map[string]string{"who": "me"})
	var res echoRes
	if err := kv.CallJSON(jctx, "get", &echoReq{Key: "k"}, &res, ResponseHeaders(&rh)); err != nil {
		t.Fatal(err)
	}
	if rh["seen"] != "me" || jctx.ResponseHeaders() != nil {
		t.Errorf("ResponseHeaders = %v, the context's = %v; want seen=me and none", rh, jctx.ResponseHeaders())
	}
}

// BenchmarkTransportFor times what reading tchannel-go's call options
// costs a call: a plain context (one lookup), a context with tchannel-go's
// parameters but no options (a handler's), and one with options.
func BenchmarkTransportFor(b *testing.B) {
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"plain", ctxTimeout(b)},
		{"parameters", builtCtx(b, tchannel.NewContextBuilder(0))},
		{"options", builtCtx(b, tchannel.NewContextBuilder(0).SetShardKey("user-42"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var o *callOptions
			for b.Loop() {
				if _, _, err := o.transportFor(bc.ctx, tchannel.Raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
