package thrift

import (
	"context"
	"errors"
	"time"

	"testing"

	"github.com/sluice-rpc/sluice/channel"
	"github.com/sluice-rpc/sluice/serviceconfig"
	"github.com/uber/tchannel-go/examples/keyvalue/gen-go/keyvalue"
)

// retryConfig retries BUSY and UNEXPECTED up to 3 attempts, without retry
// throttling so that every busy answer may be retried.
const retryConfig = `{"methodConfig": [{
	"name": [{"service": "keyvalue"}],
	"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.01s",
		"backoffMultiplier": 2, "retryableStatusCodes": ["BUSY", "UNEXPECTED"]}
}]}`

// startRetryClient returns a generated client on a Sluice channel (wall
// clock: backoff timers must fire) with retryConfig applied.
func startRetryClient(t *testing.T, servers ...*kvServer) keyvalue.TChanKeyValue {
	t.Helper()
	cfg, err := serviceconfig.Parse([]byte(retryConfig))
	if err != nil {
		t.Fatalf("serviceconfig.Parse: %v", err)
	}
	ch, err := channel.New("kv-retry-client", channel.WithServiceConfig(cfg))
	if err != nil {
		t.Fatalf("channel.New: %v", err)
	}
	t.Cleanup(ch.Close)
	cl, err := ch.NewClient(service)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if err := cl.AddPeer(s.hostPort); err != nil {
			t.Fatalf("AddPeer: %v", err)
		}
	}
	// Retries go to distinct peers among those ready: have them all ready.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return keyvalue.NewTChanKeyValueClient(NewClient(cl))
}

// Of two servers one answers Busy: every call succeeds, each busy answer
// is retried on the other peer, and that retry carries
// previous-rpc-attempts: 1, which the handler reads with PreviousAttempts.
func TestBusyIsRetriedOnAnotherPeerWithPreviousAttempts(t *testing.T) {
	good, _ := startServer(t)
	bad, _ := startServer(t)
	bad.busy.Store(true)
	kv := startRetryClient(t, good, bad)

	const calls = 40
	for i := 0; i < calls; i++ {
		v, err := kv.HealthCheck(ctxTimeout(t, nil))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if v != "OK" {
			t.Errorf("v = %q, want %q", v, "OK")
		}
	}
	busy := int(bad.received.Load())
	if busy <= 0 {
		t.Fatalf("no call tried the busy peer first: got %v, want > %v", busy, 0)
	}
	if got := good.received.Load(); got != calls {
		t.Errorf("the good peer saw every call once: got %v, want %v", got, calls)
	}
	for _, n := range bad.previousAttempts() {
		if n != 0 {
			t.Errorf("a retry went back to the busy peer: got %v, want 0", n)
		}
	}
	retried := 0
	for _, n := range good.previousAttempts() {
		if n > 1 {
			t.Fatalf("n = %v, want <= %v", n, 1)
		}
		retried += n
	}
	if retried != busy {
		t.Errorf("each busy answer is followed by one retry with previous-rpc-attempts: 1: got %v, want %v", retried, busy)
	}
}

// A declared exception is a successful transport: never retried, even by a
// policy that retries every code the handler could fail with.
func TestDeclaredExceptionNotRetriedUnderRetryPolicy(t *testing.T) {
	a, _ := startServer(t)
	b, _ := startServer(t)
	kv := startRetryClient(t, a, b)
	_, err := kv.Get(ctxTimeout(t, nil), "missing")
	var nf *keyvalue.KeyNotFound
	if !errors.As(err, &nf) {
		t.Fatalf("Get error = %v, want a %T", err, nf)
	}
	if got := a.received.Load() + b.received.Load(); got != 1 {
		t.Errorf("a.received.Load()+b.received.Load() = %v, want %v", got, 1)
	}
}
