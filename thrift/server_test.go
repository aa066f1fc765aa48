package thrift

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/internal/testkit/testwait"
	"github.com/sluice-rpc/sluice/retry"
	"github.com/sluice-rpc/sluice/stats"
	"github.com/uber-go/tally/v4"
	"github.com/uber/tchannel-go"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
	"github.com/uber/tchannel-go/raw"
	athrift "github.com/uber/tchannel-go/thirdparty/github.com/apache/thrift/lib/go/thrift"
	tthrift "github.com/uber/tchannel-go/thrift"
	"github.com/uber/tchannel-go/thrift/gen-go/meta"
)

// Handlers registered through NewServer sit behind the channel's guard:
// requests are counted, and shedding answers Busy before the handler runs.
func TestServerIsBehindTheGuard(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	// One request admitted, the next token in 1000 s: the second is shed.
	s, _ := startServer(t, channel.WithScope(scope), channel.WithShedding(channel.ShedConfig{MaxRPS: 0.001, Burst: 1}))
	_, _, kv := startClient(t, s)

	_, err := kv.HealthCheck(ctxTimeout(t, nil))
	if err != nil {
		t.Fatalf("HealthCheck: %v", err)
	}
	_, err = kv.HealthCheck(ctxTimeout(t, nil))
	var ce *channel.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("HealthCheck error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Busy {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Busy)
	}
	if got := s.received.Load(); got != 1 {
		t.Errorf("the shed request reached the handler: got %v, want %v", got, 1)
	}

	if got := counterSum(scope, stats.ServerCalls); got != 2 {
		t.Errorf("server.calls = %v, want %v", got, 2)
	}
	if got := counterSum(scope, stats.ServerShed); got != 1 {
		t.Errorf("server.shed = %v, want %v", got, 1)
	}
}

// counterSum is the sum of scope's counters called name, whatever their
// tags.
func counterSum(scope tally.TestScope, name string) int64 {
	var n int64
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == name {
			n += c.Value()
		}
	}
	return n
}

// NewServer registers tchannel-go's Thrift meta service (health checks)
// under the channel's own service name, and a Sluice client calls it.
func TestServerAnswersMetaHealth(t *testing.T) {
	s, _ := startServer(t)
	c, _, _ := startClient(t, s)
	var res meta.MetaHealthResult
	ok, err := NewClient(c).Call(ctxTimeout(t, nil), "Meta", "health", &meta.MetaHealthArgs{Hr: &meta.HealthRequest{}}, &res)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if !ok {
		t.Fatal("ok = false, want true")
	}
	if res.Success == nil {
		t.Fatal("res.Success is nil")
	}
	if !res.Success.Ok {
		t.Error("res.Success.Ok = false, want true")
	}
}

type pushbackHandler struct {
	keyvalue.TChanKeyValue
	p retry.Pushback
}

func (h pushbackHandler) Set(ctx tthrift.Context, key, value string) error {
	ctx.SetResponseHeaders(map[string]string{"kept": "yes"})
	SetPushback(ctx, h.p)
	return nil
}

func TestSetPushback(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    retry.Pushback
		want map[string]string
	}{
		{"delay", retry.PushbackAfter(150 * time.Millisecond), map[string]string{"kept": "yes", retry.PushbackHeader: "150"}},
		{"stop", retry.PushbackStopped(), map[string]string{"kept": "yes", retry.PushbackHeader: "-1"}},
		{"none", retry.Pushback{}, map[string]string{"kept": "yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := channel.New(service)
			if err != nil {
				t.Fatalf("channel.New: %v", err)
			}
			t.Cleanup(ch.Close)
			NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(pushbackHandler{p: tc.p}))
			if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
				t.Fatalf("ListenAndServe: %v", err)
			}
			_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
			ctx := ctxTimeout(t, nil)
			if err := kv.Set(ctx, "k", "v"); err != nil {
				t.Fatalf("Set: %v", err)
			}
			if got := ctx.ResponseHeaders(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ctx.ResponseHeaders() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSetPushbackKeepsTheHandlersMap(t *testing.T) {
	ctx := tthrift.WithHeaders(context.Background(), nil)
	mine := map[string]string{"a": "1", retry.PushbackHeader: "5"}
	ctx.SetResponseHeaders(mine)
	SetPushback(ctx, retry.PushbackAfter(time.Second))
	if got := ctx.ResponseHeaders()[retry.PushbackHeader]; got != "1000" {
		t.Errorf("got %q, want %q", got, "1000")
	}
	if mine[retry.PushbackHeader] != "5" {
		t.Errorf("SetPushback modified the handler's map: got %q, want %q", mine[retry.PushbackHeader], "5")
	}
	SetPushback(ctx, retry.Pushback{})
	_, ok := ctx.ResponseHeaders()[retry.PushbackHeader]
	if ok {
		t.Error("ok = true, want false")
	}
	if got := ctx.ResponseHeaders()["a"]; got != "1" {
		t.Errorf(`ctx.ResponseHeaders()["a"] = %q, want %q`, got, "1")
	}
}

// A handler error that is neither a declared exception nor a system error
// answers Unexpected, as on tchannel-go.
func TestHandlerErrorIsUnexpected(t *testing.T) {
	ch, err := channel.New(service)
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	t.Cleanup(ch.Close)
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(failingHandler{}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
	_, err = kv.Get(ctxTimeout(t, nil), "k")
	var ce *channel.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("Get error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.Unexpected {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.Unexpected)
	}
}

// A system error the handler returns wrapped answers with its code, as for
// raw and JSON handlers (tchannel-go's Thrift server sees only an unwrapped
// one, and would answer UNEXPECTED).
func TestHandlerWrappedSystemErrorKeepsItsCode(t *testing.T) {
	ch, err := channel.New(service)
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	t.Cleanup(ch.Close)
	NewServer(ch).Register(keyvalue.NewTChanKeyValueServer(wrappingHandler{}))
	if err := ch.ListenAndServe("127.0.0.1:0"); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	_, _, kv := startClient(t, &kvServer{hostPort: ch.HostPort()})
	_, err = kv.Get(ctxTimeout(t, nil), "k")
	var ce *channel.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("Get error = %v, want a %T", err, ce)
	}
	if ce.Code != codes.BadRequest {
		t.Errorf("ce.Code = %v, want %v", ce.Code, codes.BadRequest)
	}
	if ce.Message != "key k: no such shard" {
		t.Errorf("ce.Message = %q, want %q", ce.Message, "key k: no such shard")
	}
}

type wrappingHandler struct{ keyvalue.TChanKeyValue }

func (wrappingHandler) Get(_ tthrift.Context, key string) (string, error) {
	return "", fmt.Errorf("lookup: %w", tchannel.NewSystemError(tchannel.ErrCodeBadRequest, "key %s: no such shard", key))
}

type failingHandler struct{ keyvalue.TChanKeyValue }

func (failingHandler) Get(tthrift.Context, string) (string, error) {
	return "", errors.New("disk on fire")
}

// plainThriftCall calls method of the Thrift server at hp through a plain
// tchannel-go channel with arg3 as it is (and no headers).
func plainThriftCall(t *testing.T, hp, method string, arg3 []byte) error {
	t.Helper()
	ch, err := tchannel.NewChannel("plain-client", nil)
	if err != nil {
		t.Fatalf("tchannel.NewChannel: %v", err)
	}
	t.Cleanup(func() { closePlain(t, ch) })
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Limit)
	defer cancel()
	call, err := ch.BeginCall(ctx, hp, service, method, &tchannel.CallOptions{Format: tchannel.Thrift})
	if err != nil {
		t.Fatalf("BeginCall: %v", err)
	}
	_, _, _, err = raw.WriteArgs(call, []byte{0, 0}, arg3)
	return err
}

// A request body over the Channel's limit, or one declaring a string or a
// container longer than the limit, is answered BAD_REQUEST saying the
// limit, before the handler runs and before anything is allocated for what
// it declares; one at the limit is served.
func TestServerBoundsRequestBodies(t *testing.T) {
	const limit = 1024
	// KeyValue::Set's arguments: field 1 (key) and 2 (value), strings.
	str := func(id byte, n uint32, body string) []byte {
		return append([]byte{byte(athrift.STRING), 0, id, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
	}
	setArgs := func(value string) []byte {
		b := append(str(1, 1, "k"), str(2, uint32(len(value)), value)...)
		return append(b, byte(athrift.STOP))
	}
	for _, tc := range []struct {
		name string
		arg3 []byte
	}{
		{"long value", setArgs(strings.Repeat("v", 64<<10))},
		// 300 unknown i32 fields, skipped: no length declares the excess.
		{"many fields", append(bytes.Repeat([]byte{byte(athrift.I32), 0, 9, 0, 0, 0, 1}, 300), byte(athrift.STOP))},
		{"declared string", str(1, 1<<31-1, "only a few bytes")},
		// A list where a string is expected is skipped, through the limit.
		{"declared list", []byte{byte(athrift.LIST), 0, 1, byte(athrift.I32), 0x7f, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := tally.NewTestScope("", nil)
			s, _ := startServer(t, channel.WithMaxRequestSize(limit), channel.WithScope(scope))
			err := plainThriftCall(t, s.hostPort, "KeyValue::Set", tc.arg3)
			var se tchannel.SystemError
			if !errors.As(err, &se) {
				t.Fatalf("plainThriftCall error = %v, want a %T", err, se)
			}
			if got := se.Code(); got != tchannel.ErrCodeBadRequest {
				t.Errorf("%s: got %v, want %v", se.Message(), got, tchannel.ErrCodeBadRequest)
			}
			if got := se.Message(); !strings.Contains(got, "1024 bytes") {
				t.Errorf("se.Message() = %q, want it to contain %q", got, "1024 bytes")
			}
			if got := s.received.Load(); got != 0 {
				t.Errorf("the handler ran: got %v, want 0", got)
			}
			oversize := scope.Snapshot().Counters()[stats.ServerOversize+"+"]
			if oversize == nil {
				t.Fatalf("nothing was counted on %s", stats.ServerOversize)
			}
			if got := oversize.Value(); got != 1 {
				t.Errorf("oversize.Value() = %v, want %v", got, 1)
			}
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		s, _ := startServer(t, channel.WithMaxRequestSize(limit))
		arg3 := setArgs(strings.Repeat("v", limit-len(setArgs(""))))
		if len(arg3) != limit {
			t.Fatalf("len(arg3) = %d, want %d", len(arg3), limit)
		}
		if err := plainThriftCall(t, s.hostPort, "KeyValue::Set", arg3); err != nil {
			t.Fatalf("plainThriftCall: %v", err)
		}
		if got := s.received.Load(); got != 1 {
			t.Errorf("s.received.Load() = %v, want %v", got, 1)
		}
	})
}

// A Thrift server's metrics say how each request was answered: an
// exception is an application error, a Busy a system error coded BUSY,
// per method and caller.
func TestServerMetricsClassifyThrift(t *testing.T) {
	scope := tally.NewTestScope("", nil)
	s, _ := startServer(t, channel.WithScope(scope))
	_, _, kv := startClient(t, s)
	if err := kv.Set(ctxTimeout(t, nil), "k", "v"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if _, err := kv.Get(ctxTimeout(t, nil), "missing"); err == nil {
		t.Fatal("Get of a missing key: no error, want KeyNotFound")
	}
	s.busy.Store(true)
	if _, err := kv.Get(ctxTimeout(t, nil), "k"); err == nil {
		t.Fatal("Get while busy: no error, want BUSY")
	}
	key := func(name, method string, more ...string) string {
		k := name + "+caller=kv-client"
		if len(more) == 2 {
			k += "," + more[0] + "=" + more[1]
		}
		return k + ",method=KeyValue::" + method + ",service=" + service
	}
	want := map[string]int64{
		key(stats.ServerCalls, "Set"):                      1,
		key(stats.ServerCalls, "Get"):                      2,
		key(stats.ServerCallAppErrors, "Get"):              1,
		key(stats.ServerCallErrors, "Get", "code", "BUSY"): 1,
	}
	testwait.Until(t, "the server's counters", func() bool {
		cs := scope.Snapshot().Counters()
		for k, v := range want {
			if c, ok := cs[k]; !ok || c.Value() != v {
				return false
			}
		}
		return true
	})
	for k, c := range scope.Snapshot().Counters() {
		if c.Tags()["method"] == "KeyValue::Set" && c.Name() != stats.ServerCalls {
			t.Errorf("%s = %d: Set succeeded", k, c.Value())
		}
	}
}
