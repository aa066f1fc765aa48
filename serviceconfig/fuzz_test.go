package serviceconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-rpc/sluice/retry"
)

// FuzzParse: Parse never panics; it either returns a *Error or a config
// that satisfies every rule.
func FuzzParse(f *testing.F) {
	f.Add(full)
	f.Add(`{}`)
	f.Add(rp("maxAttempts", "1"))
	f.Add(hp(`"maxAttempts":2,"hedgingDelay":"0s","nonFatalStatusCodes":["BUSY"]`))
	f.Add(`{"retryThrottling":{"maxTokens":1e3,"tokenRatio":0.001}}`)
	f.Fuzz(func(t *testing.T, data string) {
		c, err := Parse([]byte(data))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), "serviceconfig: ") {
				t.Fatalf("error %T %q is not a serviceconfig *Error", err, err)
			}
			return
		}
		for i := range c.Methods {
			m := &c.Methods[i]
			if len(m.Names) == 0 || m.Retry != nil && m.Hedge != nil || m.Timeout < 0 {
				t.Fatalf("methodConfig[%d] breaks a rule: %+v", i, m)
			}
			if m.Retry != nil {
				if err := m.Retry.Validate(); err != nil {
					t.Fatalf("accepted an invalid retry policy: %v", err)
				}
				if a := m.Retry.Attempts(0); a < 2 || a > retry.MaxAttemptsCap {
					t.Fatalf("retry attempts %d", a)
				}
			}
			if m.Hedge != nil {
				if err := m.Hedge.Validate(); err != nil {
					t.Fatalf("accepted an invalid hedging policy: %v", err)
				}
			}
			for _, n := range m.Names {
				if got, ok := c.Lookup(n.Service, n.Method); !ok || got != m {
					t.Fatalf("Lookup(%q, %q) does not find methodConfig[%d]", n.Service, n.Method, i)
				}
			}
		}
		if c.RetryThrottling != nil {
			if err := c.RetryThrottling.Validate(); err != nil {
				t.Fatalf("accepted throttling that retry rejects: %v", err)
			}
		}
	})
}
