package retry

import (
	"errors"
	"math"
	"testing"
)

func TestThrottleConfigValidate(t *testing.T) {
	tests := []struct {
		cfg     ThrottleConfig
		wantErr string
	}{
		{ThrottleConfig{10, 0.1}, ""},
		{ThrottleConfig{1000, 0.001}, ""},
		{ThrottleConfig{0.001, 1e9}, ""},
		{ThrottleConfig{2.5, 0.125}, ""},
		{ThrottleConfig{0, 0.1}, "retry: ThrottleConfig.MaxTokens is 0, must be in (0, 1000]"},
		{ThrottleConfig{-1, 0.1}, "retry: ThrottleConfig.MaxTokens is -1, must be in (0, 1000]"},
		{ThrottleConfig{1000.001, 0.1}, "retry: ThrottleConfig.MaxTokens is 1000.001, must be in (0, 1000]"},
		{ThrottleConfig{math.NaN(), 0.1}, "retry: ThrottleConfig.MaxTokens is NaN, must be in (0, 1000]"},
		{ThrottleConfig{10.0001, 0.1}, "retry: ThrottleConfig.MaxTokens is 10.0001, must have at most 3 decimal places"},
		{ThrottleConfig{10, 0}, "retry: ThrottleConfig.TokenRatio is 0, must be a finite number > 0"},
		{ThrottleConfig{10, math.Inf(1)}, "retry: ThrottleConfig.TokenRatio is +Inf, must be a finite number > 0"},
		{ThrottleConfig{10, 0.1234}, "retry: ThrottleConfig.TokenRatio is 0.1234, must have at most 3 decimal places"},
		{ThrottleConfig{10, 0.0005}, "retry: ThrottleConfig.TokenRatio is 0.0005, must have at most 3 decimal places"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		got := ""
		if err != nil {
			got = err.Error()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%+v: error %v is not a *FieldError", tt.cfg, err)
			}
		}
		if got != tt.wantErr {
			t.Errorf("%+v: Validate() = %q, want %q", tt.cfg, got, tt.wantErr)
		}
	}
}
