package serviceconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/balance"
)

func TestParseBalancing(t *testing.T) {
	c, err := Parse([]byte(`{"balancing": [
		{"services": ["kv", "cache"],
		 "slowStart": {"window": "20s", "aggression": 2, "minWeight": 0.05},
		 "outlierEjection": {"consecutiveErrors": 3, "baseEjectionTime": "10s", "maxEjectionTime": "60s", "maxEjectionPercent": 25, "panicThreshold": 40},
		 "shardBalanceFactor": 1.5},
		{"slowStart": {"disabled": true}, "outlierEjection": {"disabled": true}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := balance.Config{
		SlowStart:     balance.SlowStart{Window: 20 * time.Second, Aggression: 2, MinWeight: 0.05},
		Ejection:      balance.Ejection{ConsecutiveErrors: 3, BaseTime: 10 * time.Second, MaxTime: time.Minute, MaxPercent: 25, PanicThreshold: 40},
		BalanceFactor: 1.5,
	}
	for _, s := range []string{"kv", "cache"} {
		if got := c.BalancingFor(s); got != want {
			t.Errorf("BalancingFor(%q) = %+v, want %+v", s, got, want)
		}
	}
	if got := c.BalancingFor("other"); !got.SlowStart.Disabled || !got.Ejection.Disabled {
		t.Errorf("BalancingFor(other) = %+v, want the catch-all entry's (both disabled)", got)
	}
	if got := (*Config)(nil).BalancingFor("kv"); got != (balance.Config{}) {
		t.Errorf("a nil config's balancing is %+v, want the defaults", got)
	}
}

func TestParseBalancingInvalid(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{`{"balancing": {}}`, "serviceconfig: balancing is {}, must be a JSON array"},
		{`{"balancing": [{"services": ["kv"], "slowstart": {}}]}`, `serviceconfig: balancing[0] has unknown field "slowstart"`},
		{`{"balancing": [{"services": [""]}]}`, `serviceconfig: balancing[0].services[0] is "", must be a service name`},
		{`{"balancing": [{"services": ["kv"]}, {"services": ["kv"]}]}`, `serviceconfig: balancing[1].services[0] is "kv", duplicates balancing[0].services[0]`},
		{`{"balancing": [{}, {}]}`, "serviceconfig: balancing[1] has no services, as balancing[0] has"},
		{`{"balancing": [{"slowStart": {"window": "0s"}}]}`, `serviceconfig: balancing[0].slowStart.window is "0s", must be > 0`},
		{`{"balancing": [{"slowStart": {"aggression": 0}}]}`, "serviceconfig: balancing[0].slowStart.aggression is 0, must be a finite number > 0"},
		{`{"balancing": [{"slowStart": {"minWeight": 2}}]}`, "serviceconfig: balancing[0].slowStart.minWeight is 2, must be in (0, 1]"},
		{`{"balancing": [{"slowStart": {"disabled": "yes"}}]}`, `serviceconfig: balancing[0].slowStart.disabled is "yes", must be true or false`},
		{`{"balancing": [{"outlierEjection": {"consecutiveErrors": 2.5}}]}`, "serviceconfig: balancing[0].outlierEjection.consecutiveErrors is 2.5, must be a whole number in [1, 1048576]"},
		{`{"balancing": [{"outlierEjection": {"maxEjectionPercent": 0}}]}`, "serviceconfig: balancing[0].outlierEjection.maxEjectionPercent is 0, must be in (0, 100]"},
		{`{"balancing": [{"outlierEjection": {"panicThreshold": 101}}]}`, "serviceconfig: balancing[0].outlierEjection.panicThreshold is 101, must be in (0, 100]"},
		{`{"balancing": [{"outlierEjection": {"baseEjectionTime": "60s", "maxEjectionTime": "10s"}}]}`, "serviceconfig: balancing[0].outlierEjection.maxEjectionTime"},
		{`{"balancing": [{"shardBalanceFactor": 1}]}`, "serviceconfig: balancing[0].shardBalanceFactor is 1, must be a finite number > 1"},
	} {
		_, err := Parse([]byte(tt.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%s)\n got: %v\nwant: %s", tt.doc, err, tt.want)
		}
	}
}
