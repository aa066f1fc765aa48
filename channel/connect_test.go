package channel

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/backoff"
	"github.com/sluice-rpc/sluice/internal/pool"
)

// ConnectConfig's documentation states the connection pool's defaults;
// they must stay the same numbers.
func TestConnectConfigDefaultsAsDocumented(t *testing.T) {
	if pool.DefaultConnectTimeout != 5*time.Second {
		t.Errorf("connect timeout %v, documented as 5 s", pool.DefaultConnectTimeout)
	}
	want := backoff.Exponential{Initial: time.Second, Max: 120 * time.Second, Multiplier: 1.6, Jitter: backoff.ProportionalJitter, Spread: 0.2}
	if got := pool.DefaultConnectBackoff(); got != want {
		t.Errorf("connect backoff %+v, documented as %+v", got, want)
	}
	if got := pool.DefaultHealthCheck(); got != (pool.HealthCheck{Interval: time.Second, Timeout: 500 * time.Millisecond, Failures: 3}) {
		t.Errorf("health check %+v, documented as a ping a second, three unanswered in 0.5 s", got)
	}
	if pool.DefaultConnectBurst != 2500 || pool.DefaultConnectRate != 100 {
		t.Errorf("connect budget %d at once then %d a second, documented as 2,500 and 100", pool.DefaultConnectBurst, pool.DefaultConnectRate)
	}
}

// Validate names the Channel's field, and New refuses what it refuses.
func TestConnectConfigValidateNamesTheField(t *testing.T) {
	for _, tt := range []struct {
		c    ConnectConfig
		want string
	}{
		{ConnectConfig{Timeout: -time.Second}, "channel: ConnectConfig.Timeout is -1s, must be >= 0"},
		{ConnectConfig{HealthCheck: HealthCheck{Interval: time.Second}}, "channel: ConnectConfig.HealthCheck"},
		{ConnectConfig{Budget: ConnectBudget{Burst: -1}}, "channel: ConnectConfig.Budget.Burst is -1"},
	} {
		if err := tt.c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v.Validate() = %v, want %q", tt.c, err, tt.want)
		}
	}
	if err := (ConnectBudget{Rate: 1e-9}).Validate(); err == nil || !strings.Contains(err.Error(), "Budget.Rate") {
		t.Errorf("ConnectBudget{Rate: 1e-9}.Validate() = %v, want an error naming Budget.Rate", err)
	}
	if err := (ConnectConfig{}).Validate(); err != nil {
		t.Errorf("the zero ConnectConfig: %v", err)
	}
}
