package balance

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	for _, tt := range []struct {
		c    Config
		want string
	}{
		{Config{SlowStart: SlowStart{Window: -1}}, "SlowStart.Window is -1ns, must be >= 0"},
		{Config{SlowStart: SlowStart{Aggression: -1}}, "SlowStart.Aggression is -1"},
		{Config{SlowStart: SlowStart{Aggression: math.Inf(1)}}, "SlowStart.Aggression is +Inf"},
		{Config{SlowStart: SlowStart{MinWeight: 1.5}}, "SlowStart.MinWeight is 1.5, must be in (0, 1]"},
		{Config{Ejection: Ejection{ConsecutiveErrors: -2}}, "Ejection.ConsecutiveErrors is -2"},
		{Config{Ejection: Ejection{BaseTime: time.Minute, MaxTime: time.Second}}, "Ejection.MaxTime is 1s, must be >= BaseTime (1m0s)"},
		{Config{Ejection: Ejection{BaseTime: time.Hour}}, "Ejection.MaxTime is 5m0s, must be >= BaseTime (1h0m0s)"},
		{Config{Ejection: Ejection{MaxPercent: 101}}, "Ejection.MaxPercent is 101"},
		{Config{Ejection: Ejection{PanicThreshold: math.NaN()}}, "Ejection.PanicThreshold is NaN"},
		{Config{BalanceFactor: 1}, "BalanceFactor is 1, must be a finite number > 1"},
		{Config{BalanceFactor: math.Inf(1)}, "BalanceFactor is +Inf"},
	} {
		err := tt.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "balance: ") {
			t.Errorf("Validate(%+v) = %v, want %q", tt.c, err, tt.want)
		}
	}
}
