package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/internal/testkit/slowtest"
	"github.com/sluice-rpc/sluice/tools/internal/millis"
)

// shortConfig is the benchmark cut to about four seconds of load a row:
// two replacements, the DNS period and the quiet time shortened to match.
// The settle stays long enough for a new instance to get its first calls
// at slow start's minimum weight (10%: about 1 call in 30 among four
// instances, 6 calls/s at this rate). At 300 ms (225 ms at the least)
// once a new instance got none before the run ended (TestShortRun
// failed); in 25 runs beside a CPU hog the first call came at most 409 ms
// after registration. 1.5 s (1.125 s at the least) leaves a wide margin.
func shortConfig(rows ...Row) Config {
	return Config{Rows: rows, Rate: 200, Replacements: 2, Warmup: millis.Duration(300 * time.Millisecond), Steady: millis.Duration(500 * time.Millisecond),
		Settle: millis.Duration(1500 * time.Millisecond), DNSPeriod: millis.Duration(500 * time.Millisecond), DNSMinInterval: millis.Duration(200 * time.Millisecond),
		Grace: millis.Duration(2 * time.Second), Quiet: millis.Duration(300 * time.Millisecond)}
}

// A short run of every row: the Sluice discovery rows fail no call, and
// every new instance gets calls.
func TestShortRun(t *testing.T) {
	slowtest.Skip(t, "four rows of real deploys, 17 s")
	rows := AllRows
	cfg := shortConfig(rows...)
	cfg.EmbeddedEtcd = true
	cfg.Progress = func(s string) { t.Log(s) }
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := res.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if len(res.Rows) != len(rows) {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(rows))
	}
	for _, r := range res.Rows {
		if r.Calls < 100 {
			t.Errorf("%s: %d calls, want the load's (about 200/s)", r.Row, r.Calls)
		}
		if len(r.Replacements) != cfg.Replacements {
			t.Errorf("%s: %d replacements, want %d", r.Row, len(r.Replacements), cfg.Replacements)
		}
		if r.Row.discovery() {
			if r.Failed != 0 {
				t.Errorf("%s: %d of %d calls failed (%v), want none", r.Row, r.Failed, r.Calls, r.FailedByCode)
			}
			if r.NoFirstCall != 0 {
				t.Errorf("%s: %d new instances got no call", r.Row, r.NoFirstCall)
			}
		}
	}
}
