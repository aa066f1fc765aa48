package pacing

import (
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/clock"
)

func TestQuotaWindows(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	q, err := NewQuota(QuotaConfig{Limit: 2, Window: time.Second, Dimension: DimensionUser, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(300 * time.Millisecond)
	for i, want := range []struct {
		ok     bool
		remain int64
	}{{true, 1}, {true, 0}, {false, 0}} {
		sig, ok := q.Take()
		if ok != want.ok || sig.Remaining != want.remain || sig.TimeLeft != 700*time.Millisecond || (sig.Has(FieldRemaining) && sig.Remaining == 0) != (want.remain == 0) {
			t.Fatalf("take %d: ok %v, %+v", i, ok, sig)
		}
	}
	clk.Add(700 * time.Millisecond) // next window
	if sig, ok := q.Take(); !ok || sig.Remaining != 1 || sig.TimeLeft != time.Second {
		t.Fatalf("next window: ok %v, %+v", ok, sig)
	}
}

func TestQuotaConfig(t *testing.T) {
	for _, tt := range []struct {
		cfg  QuotaConfig
		want string
	}{
		{QuotaConfig{Limit: -1}, "pacing: QuotaConfig.Limit is -1, must be >= 0 (0 means the default, 4500)"},
		{QuotaConfig{Window: -time.Second}, "pacing: QuotaConfig.Window is -1s, must be >= 0 (0 means the default, 1h0m0s)"},
		{QuotaConfig{Dimension: 9}, "pacing: QuotaConfig.Dimension is Dimension(9), must be DimensionNone, DimensionUser or DimensionUserAPI"},
	} {
		if _, err := NewQuota(tt.cfg); err == nil || err.Error() != tt.want {
			t.Errorf("NewQuota(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	// The zero QuotaConfig: DefaultLimit requests per DefaultWindow.
	clk := clock.NewFake(time.Unix(0, 0))
	q, err := NewQuota(QuotaConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	sig, ok := q.Take()
	if !ok || sig.Limit != DefaultLimit || sig.Window != DefaultWindow || sig.Remaining != DefaultLimit-1 ||
		sig.TimeLeft != DefaultWindow || sig.Dimension != DimensionNone {
		t.Fatalf("zero config: ok %v, %+v", ok, sig)
	}
}
