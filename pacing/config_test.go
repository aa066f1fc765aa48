package pacing

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/retry"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{}, ""},
		{Config{Strategy: StrategyReserve, Limit: 100, Window: time.Minute, Multiplier: 2, Jitter: 1, Reserve: 0.5, MaxSleep: time.Minute}, ""},
		{Config{Strategy: "fast"}, "Config.Strategy"},
		{Config{Limit: -1}, "Config.Limit"},
		{Config{Window: -time.Second}, "Config.Window"},
		{Config{Multiplier: 0.5}, "Config.Multiplier"},
		{Config{Multiplier: math.Inf(1)}, "Config.Multiplier"},
		{Config{Multiplier: math.NaN()}, "Config.Multiplier"},
		{Config{Jitter: -0.1}, "Config.Jitter"},
		{Config{Jitter: 1.5}, "Config.Jitter"},
		{Config{Reserve: 1}, "Config.Reserve"},
		{Config{InitialSleep: -1}, "Config.InitialSleep"},
		{Config{MaxSleep: -1}, "Config.MaxSleep"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		var fe *retry.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: unexpected %v", tc.cfg, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: error %v, want one naming %s", tc.cfg, err, tc.field)
		}
	}
	if got := (Config{}).MinSleep(); got != 800*time.Millisecond {
		t.Errorf("MinSleep = %v, want 800ms", got)
	}
}
