package retryexec

import (
	"math"
	"sync"
	"testing"

	"github.com/sluice-rpc/sluice/retry"
)

// NewThrottle refuses exactly the configurations retry.ThrottleConfig's
// Validate does, with its error.
func TestNewThrottleValidates(t *testing.T) {
	for _, c := range []retry.ThrottleConfig{
		{MaxTokens: 10, TokenRatio: 0.1}, {MaxTokens: 0.001, TokenRatio: 1e9},
		{}, {MaxTokens: 10}, {MaxTokens: 1000.001, TokenRatio: 1}, {MaxTokens: 10.0001, TokenRatio: 0.1},
		{MaxTokens: math.NaN(), TokenRatio: 0.1}, {MaxTokens: 10, TokenRatio: math.Inf(1)},
	} {
		th, err := NewThrottle(c)
		want := c.Validate()
		if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
			t.Errorf("NewThrottle(%+v) error %v, want Validate's %v", c, err, want)
		}
		if err == nil && th.Tokens() != c.MaxTokens {
			t.Errorf("NewThrottle(%+v) starts with %v tokens, want full", c, th.Tokens())
		}
	}
}

// TestThrottleA6Semantics walks the bucket of gRFC A6's example
// configuration (maxTokens 10, tokenRatio 0.1) through its rules.
func TestThrottleA6Semantics(t *testing.T) {
	type step struct {
		op         string // "f" failure, "s" success
		n          int
		wantTokens float64
		wantAllow  bool
	}
	steps := []step{
		{"", 0, 10, true},    // starts full
		{"s", 5, 10, true},   // never above maxTokens
		{"f", 4, 6, true},    // 6 > 5
		{"f", 1, 5, false},   // 5 <= 5: the threshold itself refuses
		{"s", 1, 5.1, true},  // back over the threshold
		{"f", 1, 4.1, false}, //
		{"f", 10, 0, false},  // never below zero
		{"s", 10, 1, false},  // ten tenths are exactly one token
		{"s", 41, 5.1, true}, // 1 + 4.1
		{"s", 100, 10, true}, // capped again
		{"f", 20, 0, false},  //
		{"s", 51, 5.1, true}, //
		{"f", 0, 5.1, true},  //
	}
	th, err := NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		for range s.n {
			if s.op == "f" {
				th.RecordFailure()
			} else {
				th.RecordSuccess()
			}
		}
		if got := th.Tokens(); got != s.wantTokens {
			t.Fatalf("step %d (%d×%s): Tokens() = %v, want exactly %v", i, s.n, s.op, got, s.wantTokens)
		}
		if got := th.Allow(); got != s.wantAllow {
			t.Fatalf("step %d: Allow() = %v at %v tokens, want %v", i, got, th.Tokens(), s.wantAllow)
		}
	}
	if th.MaxTokens() != 10 {
		t.Errorf("MaxTokens() = %v", th.MaxTokens())
	}
}

func TestThrottleNoFloatDrift(t *testing.T) {
	th, err := NewThrottle(retry.ThrottleConfig{MaxTokens: 1000, TokenRatio: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		th.RecordFailure()
	}
	for range 700_000 {
		th.RecordSuccess()
	}
	if got := th.Tokens(); got != 700 {
		t.Fatalf("700000 successes of 0.001 = %v tokens, want exactly 700", got)
	}
}

func TestThrottleOddThreshold(t *testing.T) {
	// maxTokens 3: the threshold is 1.5; 2 tokens allow, 1 refuses.
	th, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 3, TokenRatio: 0.5})
	th.RecordFailure()
	if !th.Allow() {
		t.Fatal("2 tokens of 3 refused")
	}
	th.RecordSuccess() // 2.5
	th.RecordFailure() // 1.5: equal to the threshold
	if th.Allow() {
		t.Fatal("1.5 tokens of 3 allowed")
	}
	// A ratio larger than the bucket fills it in one success, no further.
	big, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 0.002, TokenRatio: 1e12})
	big.RecordFailure()
	if big.Tokens() != 0 || big.Allow() {
		t.Fatalf("after a failure: %v tokens, allow %v", big.Tokens(), big.Allow())
	}
	big.RecordSuccess()
	if big.Tokens() != 0.002 || !big.Allow() {
		t.Fatalf("after a success: %v tokens, allow %v", big.Tokens(), big.Allow())
	}
}

func TestThrottleNil(t *testing.T) {
	var th *Throttle
	th.RecordFailure()
	th.RecordSuccess()
	if !th.Allow() || th.Tokens() != 0 || th.MaxTokens() != 0 {
		t.Fatal("a nil Throttle must allow everything and report zero")
	}
}

func TestThrottleConcurrent(t *testing.T) {
	th, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 1000, TokenRatio: 0.5})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 10 {
				th.RecordFailure()
				_ = th.Allow()
			}
		})
	}
	wg.Wait()
	if got := th.Tokens(); got != 500 {
		t.Fatalf("500 concurrent failures from 1000: %v tokens, want 500", got)
	}
	for range 50 {
		wg.Go(func() {
			for range 10 {
				th.RecordSuccess()
			}
		})
	}
	wg.Wait()
	if got := th.Tokens(); got != 750 {
		t.Fatalf("500 concurrent successes of 0.5: %v tokens, want 750", got)
	}
}

func BenchmarkThrottleAllow(b *testing.B) {
	th, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = th.Allow()
		}
	})
}

func BenchmarkThrottleRecord(b *testing.B) {
	th, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%10 == 0 {
			th.RecordFailure()
		} else {
			th.RecordSuccess()
		}
	}
}

func BenchmarkThrottleRecordParallel(b *testing.B) {
	th, _ := NewThrottle(retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if i%10 == 0 {
				th.RecordFailure()
			} else {
				th.RecordSuccess()
			}
			i++
		}
	})
}
