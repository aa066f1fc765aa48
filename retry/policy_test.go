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
		{"maxAttempts 1", func(p *Policy) { p.MaxAttempts = 1 }, "retry: maxAttempts is 1, must be >= 2", "maxAttempts"},
		{"maxAttempts 0", func(p *Policy) { p.MaxAttempts = 0 }, "retry: maxAttempts is 0, must be >= 2", "maxAttempts"},
		{"initialBackoff 0", func(p *Policy) { p.InitialBackoff = 0 }, "retry: initialBackoff is 0s, must be > 0", "initialBackoff"},
		{"maxBackoff negative", func(p *Policy) { p.MaxBackoff = -time.Second }, "retry: maxBackoff is -1s, must be > 0", "maxBackoff"},
		{"multiplier 0", func(p *Policy) { p.BackoffMultiplier = 0 }, "retry: backoffMultiplier is 0, must be a finite number > 0", "backoffMultiplier"},
		{"multiplier NaN", func(p *Policy) { p.BackoffMultiplier = math.NaN() }, "retry: backoffMultiplier is NaN, must be a finite number > 0", "backoffMultiplier"},
		{"multiplier Inf", func(p *Policy) { p.BackoffMultiplier = math.Inf(1) }, "retry: backoffMultiplier is +Inf, must be a finite number > 0", "backoffMultiplier"},
		{"no codes", func(p *Policy) { p.RetryableCodes = 0 }, "retry: retryableCodes is empty, must name at least one code", "retryableCodes"},
		{"OK is not retryable", func(p *Policy) { p.RetryableCodes = codes.NewSet(codes.OK, codes.Busy) }, "retry: retryableCodes is 0x0009, must hold only TChannel error codes", "retryableCodes"},
		{"unknown bit", func(p *Policy) { p.RetryableCodes = 1 << 9 }, "retry: retryableCodes is 0x0200, must hold only TChannel error codes", "retryableCodes"},
		{"unknown jitter", func(p *Policy) { p.Jitter = 7 }, "retry: jitter is Jitter(7), must be FullJitter or EqualJitter", "jitter"},
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
