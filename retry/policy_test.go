package retry

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/codes"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func validPolicy() Policy {
	return Policy{
		MaxAttempts:       4,
		InitialBackoff:    100 * time.Millisecond,
		MaxBackoff:        time.Second,
		BackoffMultiplier: 2,
		RetryableCodes:    codes.NewSet(codes.Busy),
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Policy)
		wantErr string
		field   string
	}{
		{"valid", func(*Policy) {}, "", ""},
		{"valid equal jitter", func(p *Policy) { p.Jitter = backoff.EqualJitter }, "", ""},
		{"above cap is not an error", func(p *Policy) { p.MaxAttempts = 10 }, "", ""},
		{"maxAttempts 1", func(p *Policy) { p.MaxAttempts = 1 }, "retry: Policy.MaxAttempts is 1, must be >= 2", "Policy.MaxAttempts"},
		{"maxAttempts 0", func(p *Policy) { p.MaxAttempts = 0 }, "retry: Policy.MaxAttempts is 0, must be >= 2", "Policy.MaxAttempts"},
		{"initialBackoff 0", func(p *Policy) { p.InitialBackoff = 0 }, "retry: Policy.InitialBackoff is 0s, must be > 0", "Policy.InitialBackoff"},
		{"maxBackoff negative", func(p *Policy) { p.MaxBackoff = -time.Second }, "retry: Policy.MaxBackoff is -1s, must be > 0", "Policy.MaxBackoff"},
		{"multiplier 0", func(p *Policy) { p.BackoffMultiplier = 0 }, "retry: Policy.BackoffMultiplier is 0, must be a finite number > 0", "Policy.BackoffMultiplier"},
		{"multiplier NaN", func(p *Policy) { p.BackoffMultiplier = math.NaN() }, "retry: Policy.BackoffMultiplier is NaN, must be a finite number > 0", "Policy.BackoffMultiplier"},
		{"multiplier Inf", func(p *Policy) { p.BackoffMultiplier = math.Inf(1) }, "retry: Policy.BackoffMultiplier is +Inf, must be a finite number > 0", "Policy.BackoffMultiplier"},
		{"no codes", func(p *Policy) { p.RetryableCodes = 0 }, "retry: Policy.RetryableCodes is empty, must name at least one code", "Policy.RetryableCodes"},
		{"OK is not retryable", func(p *Policy) { p.RetryableCodes = codes.NewSet(codes.OK, codes.Busy) }, "retry: Policy.RetryableCodes is 0x0009, must hold only TChannel error codes", "Policy.RetryableCodes"},
		{"unknown bit", func(p *Policy) { p.RetryableCodes = 1 << 9 }, "retry: Policy.RetryableCodes is 0x0200, must hold only TChannel error codes", "Policy.RetryableCodes"},
		{"unknown jitter", func(p *Policy) { p.Jitter = 7 }, "retry: Policy.Jitter is Jitter(7), must be FullJitter or EqualJitter", "Policy.Jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPolicy()
			tt.edit(&p)
			err := p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("errors.As FieldError: %#v, want field %q", fe, tt.field)
			}
		})
	}
}

func TestPolicyAttemptsCap(t *testing.T) {
	tests := []struct {
		maxAttempts, limit, want int
	}{
		{4, 0, 4},
		{5, 0, 5},
		{10, 0, MaxAttemptsCap},
		{10, 7, 7},
		{3, 7, 3},
		{10, -1, MaxAttemptsCap},
	}
	for _, tt := range tests {
		p := validPolicy()
		p.MaxAttempts = tt.maxAttempts
		if got := p.Attempts(tt.limit); got != tt.want {
			t.Errorf("Policy{MaxAttempts: %d}.Attempts(%d) = %d, want %d", tt.maxAttempts, tt.limit, got, tt.want)
		}
	}
}
