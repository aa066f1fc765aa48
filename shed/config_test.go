package shed

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MinLimit: -1}, "shed: Config.MinLimit is -1, must be >= 0 (0 means the default, 1)"},
		{Config{MinLimit: 2000}, "shed: Config.MaxLimit is 0, meaning the default 1000, below MinLimit (2000); set MaxLimit >= MinLimit"},
		{Config{MinLimit: 10, MaxLimit: 5}, "shed: Config.MaxLimit is 5, must be >= MinLimit (10)"},
		{Config{InitialLimit: 2000}, "shed: Config.InitialLimit is 2000, must be between MinLimit (1) and MaxLimit (1000)"},
		{Config{InitialLimit: -3}, "shed: Config.InitialLimit is -3, must be >= 0 (0 means the default, 20)"},
		{Config{Buffer: math.NaN()}, "shed: Config.Buffer is NaN, must be a finite number >= 0"},
		{Config{Buffer: math.Inf(1)}, "shed: Config.Buffer is +Inf"},
		{Config{Window: -time.Second}, "shed: Config.Window is -1s, must be >= 0 (0 means the default, 100ms)"},
		{Config{ProbeInterval: time.Millisecond}, "shed: Config.ProbeInterval is 1ms, must be >= Window (100ms)"},
		{Config{Window: 10 * time.Second}, "shed: Config.ProbeInterval is 0s, meaning the default 5s, below Window (10s); set ProbeInterval >= Window"},
		{Config{ProbeJitter: 2}, "shed: Config.ProbeJitter is 2, must be in [0, 1]"},
		{Config{ProbeJitter: math.Inf(-1)}, "shed: Config.ProbeJitter is -Inf, must be in [0, 1]"},
		{Config{ProbeJitter: math.NaN()}, "shed: Config.ProbeJitter is NaN"},
		{Config{ProbeLimit: -1}, "shed: Config.ProbeLimit is -1, must be >= 0 (0 means the default, 3)"},
		{Config{MaxLimit: math.MaxInt32 + 1}, "shed: Config.MaxLimit is 2147483648, must be at most 2147483647"},
		{Config{ProbeSamples: MaxProbeSamples + 1}, "shed: Config.ProbeSamples is 257, must be between 1 and 256"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v.Validate() = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}

// The zero Config is valid, and so is each zero field with the others set.
func TestZeroConfigIsValid(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{MinLimit: 50, MaxLimit: 60},
		{MaxLimit: 8},
		{MinLimit: 2000, MaxLimit: 3000},
		{Window: time.Second},
		{NoBuffer: true, NoProbeJitter: true},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", cfg, err)
		}
	}
}
