package channel

import (
	"context"
	"fmt"
	"testing"

	"github.com/uber/tchannel-go"
	tjson "github.com/uber/tchannel-go/json"
	"github.com/uber/tchannel-go/raw"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/serviceconfig"
)

// reportingClassServer starts a Sluice server of service svc whose raw method
// "class" answers the class its handler's context carries, and whose
// method "rd" answers the routing delegate its middleware saw.
func reportingClassServer(t *testing.T, svc string, opts ...Option) *Channel {
	t.Helper()
	ch, err := New(svc, append(opts, WithInboundMiddleware(func(ctx context.Context, in *Inbound, next func(context.Context) error) error {
		return next(context.WithValue(ctx, rdKey{}, in.RoutingDelegate))
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	if err := ch.RegisterRaw("class", func(ctx context.Context, _ *RawRequest) (*RawResponse, error) {
		return &RawResponse{Arg3: []byte(criticality.FromContext(ctx).String())}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.RegisterRaw("rd", func(ctx context.Context, _ *RawRequest) (*RawResponse, error) {
		rd, _ := ctx.Value(rdKey{}).(string)
		return &RawResponse{Arg3: []byte(rd)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.RegisterJSON(map[string]any{"jsonClass": func(ctx tjson.Context, _ map[string]string) (map[string]string, error) {
		return map[string]string{"class": criticality.FromContext(ctx).String()}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return ch
}

type rdKey struct{}

func callString(t *testing.T, ctx context.Context, cl *Client, method string, opts ...CallOption) string {
	t.Helper()
	res, err := cl.CallRaw(ctx, method, nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Arg3)
}

// TestCriticalityReachesTheServer checks each source of a call's class,
// in the order the package comment gives, as the server's handler sees
// it.
func TestCriticalityReachesTheServer(t *testing.T) {
	srv := reportingClassServer(t, "kv")
	cfg, err := serviceconfig.Parse([]byte(`{"methodConfig": [{"name": [{"service": "kv", "method": "class"}], "criticality": "sheddable_plus"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New("client", WithServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)
	if got := callString(t, ctx, kv, "rd"); got != "" { // no config for "rd": Critical, unmarked
		t.Errorf("a Critical call's routing delegate: %q, want none", got)
	}
	if got := callString(t, ctx, kv, "class"); got != "sheddable_plus" {
		t.Errorf("the method's configured class: the server saw %q", got)
	}
	if got := callString(t, criticality.WithClass(ctx, criticality.CriticalPlus), kv, "class"); got != "critical_plus" {
		t.Errorf("the context's class over the method's: the server saw %q", got)
	}
	var res map[string]string
	if err := kv.CallJSON(criticality.WithClass(ctx, criticality.Sheddable), "jsonClass", map[string]string{}, &res); err != nil || res["class"] != "sheddable" {
		t.Errorf("a JSON call: %v, %v; want class sheddable", res, err)
	}
	// The mark never shows in the routing delegate a handler sees.
	if got := callString(t, criticality.WithClass(ctx, criticality.Sheddable), kv, "rd", WithRoutingDelegate("relay")); got != "relay" {
		t.Errorf("routing delegate %q with a class, want relay", got)
	}
}

// TestCriticalityClientDefault checks WithCriticality, and that it yields
// to the context.
func TestCriticalityClientDefault(t *testing.T) {
	srv := reportingClassServer(t, "kv")
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv", WithCriticality(criticality.Sheddable))
	if err := kv.AddPeer(srv.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)
	if got := callString(t, ctx, kv, "class"); got != "sheddable" {
		t.Errorf("the Client's class: the server saw %q", got)
	}
	if got := callString(t, criticality.WithClass(ctx, criticality.Critical), kv, "class"); got != "critical" {
		t.Errorf("the context's class over the Client's: the server saw %q", got)
	}
	if _, err := c.NewClient("other", WithCriticality(criticality.Class(9))); err == nil {
		t.Error("WithCriticality(9): no error")
	}
}

// TestCriticalityInheritedAcrossAHop: a client calls front, whose handler
// calls back with its own context; back sees the client's class, unless
// front's Client for back sets one.
func TestCriticalityInheritedAcrossAHop(t *testing.T) {
	back := reportingClassServer(t, "back")
	front, err := New("front")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	toBack := to(front, "back")
	if err := toBack.AddPeer(back.HostPort()); err != nil {
		t.Fatal(err)
	}
	if err := front.RegisterRaw("relay", func(ctx context.Context, req *RawRequest) (*RawResponse, error) {
		res, err := toBack.CallRaw(ctx, "class", nil, nil)
		if err != nil {
			return nil, err
		}
		return &RawResponse{Arg3: res.Arg3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := front.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	toFront := to(c, "front")
	if err := toFront.AddPeer(front.HostPort()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t)
	for _, cls := range []criticality.Class{criticality.Sheddable, criticality.SheddablePlus, criticality.Critical, criticality.CriticalPlus} {
		if got := callString(t, criticality.WithClass(ctx, cls), toFront, "relay"); got != cls.String() {
			t.Errorf("a %v call's handler called back as %q", cls, got)
		}
	}
	// A plain tchannel-go client sends no class: Critical, inherited as such.
	plain, err := tchannel.NewChannel("plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	_, got, _, err := raw.Call(ctx, plain, front.HostPort(), "front", "relay", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "critical" {
		t.Errorf("a plain client's call was handled as %q, want critical", got)
	}
}

// TestCriticalityCap: a server caps the class a caller may claim, and
// uncapped callers keep theirs.
func TestCriticalityCap(t *testing.T) {
	srv := reportingClassServer(t, "kv", WithCriticalityCap(func(caller string) criticality.Class {
		if caller == "batch" {
			return criticality.Sheddable
		}
		return 0 // trusted
	}))
	ctx := ctxTimeout(t)
	for _, tc := range []struct {
		caller string
		claim  criticality.Class
		want   string
	}{
		{"batch", criticality.CriticalPlus, "sheddable"},
		{"batch", 0, "sheddable"}, // no claim is Critical, capped all the same
		{"web", criticality.CriticalPlus, "critical_plus"},
		{"web", criticality.Sheddable, "sheddable"},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.caller, tc.claim), func(t *testing.T) {
			c, err := New(tc.caller)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			kv := to(c, "kv")
			if err := kv.AddPeer(srv.HostPort()); err != nil {
				t.Fatal(err)
			}
			cctx := ctx
			if tc.claim != 0 {
				cctx = criticality.WithClass(ctx, tc.claim)
			}
			if got := callString(t, cctx, kv, "class"); got != tc.want {
				t.Errorf("served as %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCriticalityPlainPeers: a plain TChannel client (tchannel-go, or yab,
// which calls through tchannel-go with caller name "yab") is served as
// Critical, and a mark it forges in its routing delegate claims nothing;
// a plain server called with a class sees the caller's routing delegate
// without the mark.
func TestCriticalityPlainPeers(t *testing.T) {
	ctx := ctxTimeout(t)
	srv := reportingClassServer(t, "kv")
	yab, err := tchannel.NewChannel("yab", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(yab.Close)
	for _, rd := range []string{"", "relay", "relay\x004", "\x004"} {
		call, err := yab.BeginCall(ctx, srv.HostPort(), "kv", "class", &tchannel.CallOptions{Format: tchannel.Raw, RoutingDelegate: rd})
		if err != nil {
			t.Fatal(err)
		}
		_, got, _, err := raw.WriteArgs(call, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "critical" {
			t.Errorf("a plain call with routing delegate %q was served as %q, want critical", rd, got)
		}
	}

	plain, err := tchannel.NewChannel("kv", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	seen := make(chan string, 2)
	plain.Register(raw.Wrap(plainRD{seen}), "rd")
	if err := plain.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c, err := New("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kv := to(c, "kv")
	if err := kv.AddPeer(plain.PeerInfo().HostPort); err != nil {
		t.Fatal(err)
	}
	sctx := criticality.WithClass(ctx, criticality.Sheddable)
	for _, rd := range []string{"relay", ""} {
		var opts []CallOption
		if rd != "" {
			opts = append(opts, WithRoutingDelegate(rd))
		}
		if _, err := kv.CallRaw(sctx, "rd", nil, nil, opts...); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got != rd {
			t.Errorf("a plain server saw routing delegate %q, want %q", got, rd)
		}
	}
}

// plainRD is a tchannel-go raw handler that reports the routing delegate
// of each call.
type plainRD struct{ seen chan<- string }

func (h plainRD) Handle(ctx context.Context, args *raw.Args) (*raw.Res, error) {
	h.seen <- tchannel.CurrentCall(ctx).RoutingDelegate()
	return &raw.Res{}, nil
}

func (plainRD) OnError(context.Context, error) {}
