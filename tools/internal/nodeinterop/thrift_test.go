package nodeinterop

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	tthrift "github.com/uber/tchannel-go/thrift"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/thrift"
)

// keyValueIDL is tchannel-go's example IDL, which examples/keyvalue
// commits and the generated Go code here is made from.
var keyValueIDL = filepath.Join("..", "..", "..", "examples", "keyvalue", "keyvalue.thrift")

// TestThriftSluiceClientNodeServer: a Sluice client's generated Thrift
// client calls a tchannel-node as/thrift server: the result, a declared
// exception and headers come back; a Sheddable call with a routing
// delegate reaches it with the caller's routing delegate, unmarked.
func TestThriftSluiceClientNodeServer(t *testing.T) {
	hostPort := startNodeServer(t, keyValueIDL)
	cl := sluiceClient(t, hostPort)
	kv := keyvalue.NewTChanKeyValueClient(thrift.NewClient(cl))

	for _, tc := range []struct {
		name string
		ctx  context.Context
		rd   string
	}{
		{"critical", context.Background(), ""},
		{"sheddable/rd=relay", criticality.WithClass(context.Background(), criticality.Sheddable), "relay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(tc.ctx, waitLimit)
			defer cancel()
			tctx := tthrift.WithHeaders(ctx, map[string]string{"tenant": "blue"})
			if tc.rd != "" {
				tctx = thrift.WithCallOptions(tctx, channel.WithRoutingDelegate(tc.rd))
			}
			v, err := kv.Get(tctx, "k")
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if v != "value-of-k" {
				t.Errorf("Get = %q, want %q", v, "value-of-k")
			}
			h := tctx.ResponseHeaders()
			if h["tenant"] != "blue" || h["seen-cn"] != "sluice-client" || h["seen-rd"] != tc.rd {
				t.Errorf("response headers %v: want tenant=blue (echoed), seen-cn=sluice-client, seen-rd=%q", h, tc.rd)
			}
		})
	}

	ctx, cancel := tthrift.NewContext(waitLimit)
	defer cancel()
	_, err := kv.Get(ctx, "missing")
	var nf *keyvalue.KeyNotFound
	if !errors.As(err, &nf) || nf.Key != "missing" {
		t.Errorf("Get(missing): got %v, want a *keyvalue.KeyNotFound for key missing", err)
	}
}

// kvServer is a Sluice Thrift KeyValue server that reports the call in
// its answer's headers.
type kvServer struct{}

func (kvServer) Get(ctx tthrift.Context, key string) (string, error) {
	h := map[string]string{}
	for k, v := range ctx.Headers() {
		h[k] = v
	}
	call := tchannel.CurrentCall(ctx)
	h["seen-cn"] = call.CallerName()
	h["seen-class"] = criticality.FromContext(ctx).String()
	ctx.SetResponseHeaders(h)
	if key == "missing" {
		return "", &keyvalue.KeyNotFound{Key: key}
	}
	return "value-of-" + key, nil
}

func (kvServer) Set(tthrift.Context, string, string) error { return nil }

func (kvServer) HealthCheck(tthrift.Context) (string, error) { return "OK", nil }

// TestThriftNodeClientSluiceServer: a tchannel-node as/thrift client calls
// a Sluice Thrift server: the result, a declared exception and headers
// come back.
func TestThriftNodeClientSluiceServer(t *testing.T) {
	ch, err := channel.New(sluiceService)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	thrift.NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(kvServer{}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	node := startNodeClient(t)
	call := nodeCall{HostPort: ch.HostPort(), Service: sluiceService, Method: "KeyValue::Get", As: "thrift", IDL: keyValueIDL, Head: map[string]string{"tenant": "blue"}}

	call.Body = map[string]string{"key": "k"}
	r := node.Call(t, call)
	if !r.OK || r.Err != nil {
		t.Fatalf("got ok=%v err=%+v, want an ok answer", r.OK, r.Err)
	}
	var v string
	if err := json.Unmarshal(r.Body, &v); err != nil || v != "value-of-k" {
		t.Errorf("the result %s (%v), want %q", r.Body, err, "value-of-k")
	}
	if r.Head["tenant"] != "blue" || r.Head["seen-cn"] != "node-client" || r.Head["seen-class"] != "critical" {
		t.Errorf("response headers %v: want tenant=blue (echoed), seen-cn=node-client, seen-class=critical", r.Head)
	}

	call.Body = map[string]string{"key": "missing"}
	r = node.Call(t, call)
	var exc struct {
		Type  string            `json:"type"`
		Value map[string]string `json:"value"`
	}
	if err := json.Unmarshal(r.Body, &exc); err != nil || r.OK || r.Err != nil || exc.Type != "notFound" || exc.Value["key"] != "missing" {
		t.Errorf("Get(missing): got ok=%v err=%+v body %s, want the notFound exception with key missing", r.OK, r.Err, r.Body)
	}
}
