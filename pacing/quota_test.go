package pacing

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

func TestQuotaWindows(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	q, err := NewQuota(2, time.Second, DimensionUser, clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(300 * time.Millisecond)
	for i, want := range []struct {
		ok     bool
		remain int64
	}{{true, 1}, {true, 0}, {false, 0}} {
		sig, ok := q.Take()
		if ok != want.ok || sig.Remaining != want.remain || sig.TimeLeft != 700*time.Millisecond || sig.Throttled() != (want.remain == 0) {
			t.Fatalf("take %d: ok %v, %+v", i, ok, sig)
		}
	}
	clk.Add(700 * time.Millisecond) // next window
	if sig, ok := q.Take(); !ok || sig.Remaining != 1 || sig.TimeLeft != time.Second {
		t.Fatalf("next window: ok %v, %+v", ok, sig)
	}
	// The headers a handler sends round-trip through ParseHeaders.
	sig, _ := q.Take()
	h := map[string]string{}
	SetHeaders(h, sig)
	got, err := ParseHeaders(h, clk.Now())
	if err != nil || !got.Throttled() || got.Wait() != time.Second {
		t.Fatalf("round trip: %+v, %v (headers %v)", got, err, h)
	}
	if _, err := NewQuota(0, time.Second, DimensionNone, nil); err == nil {
		t.Fatal("a zero limit was accepted")
	}
	if _, err := NewQuota(1, 0, DimensionNone, nil); err == nil {
		t.Fatal("a zero window was accepted")
	}
}
