package hedge

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/retry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func validPolicy() Policy {
	return Policy{MaxAttempts: 4, HedgingDelay: 500 * time.Millisecond, NonFatalCodes: codes.NewSet(codes.Busy, codes.Declined)}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Policy)
		wantErr string
		field   string
	}{
		{"valid", func(*Policy) {}, "", ""},
		{"zero delay sends all at once", func(p *Policy) { p.HedgingDelay = 0 }, "", ""},
		{"above cap is not an error", func(p *Policy) { p.MaxAttempts = 10 }, "", ""},
		{"maxAttempts 1", func(p *Policy) { p.MaxAttempts = 1 }, "hedge: Policy.MaxAttempts is 1, must be >= 2", "Policy.MaxAttempts"},
		{"maxAttempts negative", func(p *Policy) { p.MaxAttempts = -3 }, "hedge: Policy.MaxAttempts is -3, must be >= 2", "Policy.MaxAttempts"},
		{"negative delay", func(p *Policy) { p.HedgingDelay = -time.Millisecond }, "hedge: Policy.HedgingDelay is -1ms, must be >= 0", "Policy.HedgingDelay"},
		{"no codes", func(p *Policy) { p.NonFatalCodes = 0 }, "hedge: Policy.NonFatalCodes is empty, must name at least one code", "Policy.NonFatalCodes"},
		{"OK is not a failure code", func(p *Policy) { p.NonFatalCodes = codes.NewSet(codes.OK) }, "hedge: Policy.NonFatalCodes is 0x0001, must hold only TChannel error codes", "Policy.NonFatalCodes"},
		{"unknown bit", func(p *Policy) { p.NonFatalCodes = 1 << 12 }, "hedge: Policy.NonFatalCodes is 0x1000, must hold only TChannel error codes", "Policy.NonFatalCodes"},
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
			var fe *retry.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("errors.As FieldError: %#v, want field %q", fe, tt.field)
			}
		})
	}
}

func TestPolicyAttempts(t *testing.T) {
	for _, tt := range []struct{ maxAttempts, limit, want int }{
		{4, 0, 4}, {10, 0, 5}, {10, 8, 8}, {2, 8, 2}, {7, -1, 5},
	} {
		p := validPolicy()
		p.MaxAttempts = tt.maxAttempts
		if got := p.Attempts(tt.limit); got != tt.want {
			t.Errorf("Policy{MaxAttempts: %d}.Attempts(%d) = %d, want %d", tt.maxAttempts, tt.limit, got, tt.want)
		}
	}
}
