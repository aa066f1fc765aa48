package serviceconfig

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
)

const full = `{
  "methodConfig": [
    {
      "name": [{"service": "kv", "method": "Get"}, {"service": "search"}],
      "retryPolicy": {
        "maxAttempts": 4,
        "initialBackoff": "0.1s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["BUSY", "DECLINED"]
      },
      "timeout": "1.5s"
    },
    {
      "name": [{"service": "kv", "method": "Scan"}],
      "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.5s", "nonFatalStatusCodes": ["BUSY"]}
    },
    {
      "name": [{"service": "kv"}],
      "timeout": "0.000000001s",
      "waitForReady": true
    },
    {
      "name": [{}],
      "hedgingPolicy": {"maxAttempts": 10, "nonFatalStatusCodes": ["UNEXPECTED", "TIMEOUT"]}
    }
  ],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

func TestParseFull(t *testing.T) {
	c, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := []MethodConfig{
		{
			Names: []Name{{"kv", "Get"}, {"search", ""}},
			Retry: &retry.Policy{MaxAttempts: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
				BackoffMultiplier: 2, RetryableCodes: codes.NewSet(codes.Busy, codes.Declined)},
			Timeout: 1500 * time.Millisecond,
		},
		{
			Names: []Name{{"kv", "Scan"}},
			Hedge: &hedge.Policy{MaxAttempts: 3, HedgingDelay: 500 * time.Millisecond, NonFatalCodes: codes.NewSet(codes.Busy)},
		},
		{Names: []Name{{"kv", ""}}, Timeout: time.Nanosecond, WaitForReady: true},
		{
			Names: []Name{{"", ""}},
			Hedge: &hedge.Policy{MaxAttempts: 10, NonFatalCodes: codes.NewSet(codes.Unexpected, codes.Timeout)},
		},
	}
	if !reflect.DeepEqual(c.Methods, want) {
		t.Fatalf("Methods =\n%+v\nwant\n%+v", c.Methods, want)
	}
	if c.RetryThrottling == nil || *c.RetryThrottling != (retry.ThrottleConfig{MaxTokens: 10, TokenRatio: 0.1}) {
		t.Fatalf("RetryThrottling = %+v", c.RetryThrottling)
	}
	if err := c.RetryThrottling.Validate(); err != nil {
		t.Fatal(err)
	}
	// maxAttempts 10 is kept as written and capped where it is used.
	if got := c.Methods[3].Hedge.Attempts(0); got != retry.MaxAttemptsCap {
		t.Fatalf("capped hedge attempts = %d", got)
	}
}

func TestLookup(t *testing.T) {
	c, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		service, method string
		want            int // index into c.Methods, -1 for none
	}{
		{"kv", "Get", 0},
		{"search", "Anything", 0},
		{"search", "", 0},
		{"kv", "Scan", 1},
		{"kv", "Put", 2}, // the whole service beats the default
		{"kv", "", 2},
		{"other", "Get", 3},
		{"", "", 3},
	}
	for _, tt := range tests {
		m, ok := c.Lookup(tt.service, tt.method)
		if !ok || m != &c.Methods[tt.want] {
			t.Errorf("Lookup(%q, %q) = %p, %v; want methodConfig[%d]", tt.service, tt.method, m, ok, tt.want)
		}
	}
	empty, err := Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := empty.Lookup("search", "Get"); ok || m != nil {
		t.Errorf("Lookup without a match = %v, %v", m, ok)
	}
	var nilConfig *Config
	if _, ok := nilConfig.Lookup("kv", "Get"); ok {
		t.Error("nil Config matched")
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		json string
		test func(*Config) bool
	}{
		{"empty object", `{}`, func(c *Config) bool {
			return len(c.Methods) == 0 && c.RetryThrottling == nil
		}},
		{"whitespace around", " \n{}\t\n", func(c *Config) bool { return len(c.Methods) == 0 }},
		{"hedgingDelay 0s sends all at once", `{"methodConfig":[{"name":[{"service":"s"}],"hedgingPolicy":{"maxAttempts":4,"hedgingDelay":"0s","nonFatalStatusCodes":["BUSY"]}}]}`,
			func(c *Config) bool { return c.Methods[0].Hedge.HedgingDelay == 0 }},
		{"hedgingDelay may be omitted", `{"methodConfig":[{"name":[{"service":"s"}],"hedgingPolicy":{"maxAttempts":2,"nonFatalStatusCodes":["BUSY"]}}]}`,
			func(c *Config) bool { return c.Methods[0].Hedge.HedgingDelay == 0 }},
		{"nine decimals", `{"methodConfig":[{"name":[{"service":"s"}],"timeout":"1.000000001s"}]}`,
			func(c *Config) bool { return c.Methods[0].Timeout == time.Second+1 }},
		{"huge maxAttempts is capped later, not an error", `{"methodConfig":[{"name":[{"service":"s"}],"retryPolicy":{"maxAttempts":99999999999,"initialBackoff":"1s","maxBackoff":"1s","backoffMultiplier":1,"retryableStatusCodes":["BUSY"]}}]}`,
			func(c *Config) bool { return c.Methods[0].Retry.Attempts(0) == 5 }},
		{"fractional multiplier", `{"methodConfig":[{"name":[{"service":"s"}],"retryPolicy":{"maxAttempts":2,"initialBackoff":"1s","maxBackoff":"2s","backoffMultiplier":1.5,"retryableStatusCodes":["BUSY","BUSY"]}}]}`,
			func(c *Config) bool { return c.Methods[0].Retry.BackoffMultiplier == 1.5 }},
		{"throttling bounds", `{"retryThrottling":{"maxTokens":1000,"tokenRatio":0.001}}`,
			func(c *Config) bool {
				return *c.RetryThrottling == retry.ThrottleConfig{MaxTokens: 1000, TokenRatio: 0.001}
			}},
		{"throttling exponent and trailing zeros", `{"retryThrottling":{"maxTokens":1.5e2,"tokenRatio":0.12500}}`,
			func(c *Config) bool {
				return *c.RetryThrottling == retry.ThrottleConfig{MaxTokens: 150, TokenRatio: 0.125}
			}},
		{"throttling 3 decimals via exponent", `{"retryThrottling":{"maxTokens":0.001,"tokenRatio":1E-3}}`,
			func(c *Config) bool { return c.RetryThrottling.TokenRatio == 0.001 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.test(c) {
				t.Fatalf("unexpected config %+v", c)
			}
		})
	}
}

// mc wraps a method config body in a one-element config.
func mc(body string) string {
	return `{"methodConfig":[{"name":[{"service":"s","method":"m"}],` + body + `}]}`
}

// rp is a retry policy with one field replaced or removed (value "").
func rp(field, value string) string {
	fields := [][2]string{{"maxAttempts", "4"}, {"initialBackoff", `"0.1s"`}, {"maxBackoff", `"1s"`},
		{"backoffMultiplier", "2"}, {"retryableStatusCodes", `["BUSY"]`}}
	var parts []string
	found := false
	for _, f := range fields {
		if f[0] == field {
			found = true
			if value == "" {
				continue
			}
			f[1] = value
		}
		parts = append(parts, `"`+f[0]+`":`+f[1])
	}
	if !found {
		parts = append(parts, `"`+field+`":`+value)
	}
	return mc(`"retryPolicy":{` + strings.Join(parts, ",") + `}`)
}

func hp(body string) string { return mc(`"hedgingPolicy":{` + body + `}`) }

func TestParseInvalid(t *testing.T) {
	const rpath = "serviceconfig: methodConfig[0].retryPolicy."
	const hpath = "serviceconfig: methodConfig[0].hedgingPolicy."
	codeRule := `, must be one of TIMEOUT, CANCELLED, BUSY, DECLINED, UNEXPECTED, BAD_REQUEST, NETWORK, PROTOCOL`
	tests := []struct {
		name, json, want string
	}{
		// The document.
		{"empty input", ``, "serviceconfig: config is empty, must be a JSON object"},
		{"null", `null`, "serviceconfig: config is null, must be a JSON object"},
		{"array", `[]`, "serviceconfig: config is [], must be a JSON object"},
		{"broken JSON", `{"methodConfig":`, "serviceconfig: config is not valid JSON: unexpected EOF"},
		{"trailing data", `{} {}`, "serviceconfig: config has data after the JSON object"},
		{"duplicate key", `{"lease":{},"lease":{}}`, `serviceconfig: config has field "lease" twice`},
		{"unknown top-level field", `{"loadBalancingPolicy":"round_robin"}`,
			`serviceconfig: config has unknown field "loadBalancingPolicy" (known: methodConfig, retryThrottling, busyThrottling, lease, balancing)`},
		{"field names are case-sensitive", `{"MethodConfig":[]}`,
			`serviceconfig: config has unknown field "MethodConfig" (known: methodConfig, retryThrottling, busyThrottling, lease, balancing)`},
		{"methodConfig not an array", `{"methodConfig":{}}`, "serviceconfig: methodConfig is {}, must be a JSON array"},
		{"busyThrottling is refused", `{"busyThrottling":{"recoverRate":3}}`, "serviceconfig: busyThrottling is not read from a service config; set busy throttling with channel.WithBusyConfig (busy.Config)"},
		{"lease is refused", `{"lease":{"resource":"kv-reads","wants":100}}`, "serviceconfig: lease is not read from a service config; lease a service's rate with channel.WithLease and a leasing.Client resource"},

		// Method configs and names.
		{"method config not an object", `{"methodConfig":[1]}`, "serviceconfig: methodConfig[0] is 1, must be a JSON object"},
		{"unknown method field", mc(`"waitForready":true`),
			`serviceconfig: methodConfig[0] has unknown field "waitForready" (known: name, retryPolicy, hedgingPolicy, timeout, waitForReady, criticality)`},
		{"waitForReady not a bool", mc(`"waitForReady":"yes"`), `serviceconfig: methodConfig[0].waitForReady is "yes", must be true or false`},
		{"waitForReady null", mc(`"waitForReady":null`), `serviceconfig: methodConfig[0].waitForReady is null, must be true or false`},
		{"no name", `{"methodConfig":[{"timeout":"1s"}]}`, "serviceconfig: methodConfig[0].name is missing, must name at least one service"},
		{"empty name list", `{"methodConfig":[{"name":[]}]}`, "serviceconfig: methodConfig[0].name is empty, must name at least one service"},
		{"service not a string", `{"methodConfig":[{"name":[{"service":5}]}]}`, "serviceconfig: methodConfig[0].name[0].service is 5, must be a string"},
		{"unknown name field", `{"methodConfig":[{"name":[{"service":"s","methods":"m"}]}]}`,
			`serviceconfig: methodConfig[0].name[0] has unknown field "methods" (known: service, method)`},
		{"method without service", `{"methodConfig":[{"name":[{"method":"m"}]}]}`,
			`serviceconfig: methodConfig[0].name[0].method is "m", must be empty when service is empty`},
		{"duplicate name across configs", `{"methodConfig":[{"name":[{"service":"s"},{"service":"s","method":"m"}]},{"name":[{"service":"s","method":"m"}]}]}`,
			`serviceconfig: methodConfig[1].name[0] is {"service":"s","method":"m"}, duplicates methodConfig[0].name[1]`},
		{"duplicate name within a config", `{"methodConfig":[{"name":[{"service":"s"},{"service":"s","method":""}]}]}`,
			`serviceconfig: methodConfig[0].name[1] is {"service":"s","method":""}, duplicates methodConfig[0].name[0]`},
		{"both policies", mc(`"retryPolicy":{},"hedgingPolicy":{}`),
			"serviceconfig: methodConfig[0] has both retryPolicy and hedgingPolicy, at most one may be set"},
		{"timeout zero", mc(`"timeout":"0s"`), `serviceconfig: methodConfig[0].timeout is "0s", must be > 0`},
		{"timeout not a string", mc(`"timeout":1`), `serviceconfig: methodConfig[0].timeout is 1, must be a duration string such as "0.1s"`},

		// Retry policies.
		{"retry policy null", mc(`"retryPolicy":null`), "serviceconfig: methodConfig[0].retryPolicy is null, must be a JSON object"},
		{"maxAttempts 1", rp("maxAttempts", "1"), rpath + "maxAttempts is 1, must be >= 2"},
		{"maxAttempts negative", rp("maxAttempts", "-5"), rpath + "maxAttempts is -5, must be >= 2"},
		{"maxAttempts huge negative", rp("maxAttempts", "-99999999999"), rpath + "maxAttempts is -99999999999, must be >= 2"},
		{"maxAttempts fractional", rp("maxAttempts", "2.5"), rpath + "maxAttempts is 2.5, must be an integer"},
		{"maxAttempts as a string", rp("maxAttempts", `"4"`), rpath + `maxAttempts is "4", must be a number`},
		{"maxAttempts missing", rp("maxAttempts", ""), rpath + "maxAttempts is missing, it is required"},
		{"initialBackoff missing", rp("initialBackoff", ""), rpath + "initialBackoff is missing, it is required"},
		{"initialBackoff zero", rp("initialBackoff", `"0s"`), rpath + `initialBackoff is "0s", must be > 0`},
		{"initialBackoff negative", rp("initialBackoff", `"-1s"`), rpath + `initialBackoff is "-1s", must be > 0`},
		{"initialBackoff without s", rp("initialBackoff", `"0.1"`), rpath + `initialBackoff is "0.1", must be a duration string such as "0.1s"`},
		{"initialBackoff ms", rp("initialBackoff", `"100ms"`), rpath + `initialBackoff is "100ms", must be a duration string such as "0.1s"`},
		{"initialBackoff bare dot", rp("initialBackoff", `".5s"`), rpath + `initialBackoff is ".5s", must be a duration string such as "0.1s"`},
		{"initialBackoff ten decimals", rp("initialBackoff", `"0.0000000001s"`), rpath + `initialBackoff is "0.0000000001s", must be a duration string such as "0.1s"`},
		{"initialBackoff exponent", rp("initialBackoff", `"1e-1s"`), rpath + `initialBackoff is "1e-1s", must be a duration string such as "0.1s"`},
		{"initialBackoff a number", rp("initialBackoff", `0.1`), rpath + `initialBackoff is 0.1, must be a duration string such as "0.1s"`},
		{"maxBackoff too large", rp("maxBackoff", `"9223372037s"`), rpath + `maxBackoff is "9223372037s", must be at most 9223372036s`},
		{"maxBackoff far too large", rp("maxBackoff", `"315576000000s"`), rpath + `maxBackoff is "315576000000s", must be at most 9223372036s`},
		{"maxBackoff zero", rp("maxBackoff", `"0.000s"`), rpath + `maxBackoff is "0.000s", must be > 0`},
		{"multiplier zero", rp("backoffMultiplier", "0"), rpath + "backoffMultiplier is 0, must be a finite number > 0"},
		{"multiplier negative", rp("backoffMultiplier", "-2"), rpath + "backoffMultiplier is -2, must be a finite number > 0"},
		{"multiplier overflow", rp("backoffMultiplier", "1e999"), rpath + "backoffMultiplier is 1e999, must be a finite number > 0"},
		{"multiplier a string", rp("backoffMultiplier", `"2"`), rpath + `backoffMultiplier is "2", must be a number`},
		{"codes empty", rp("retryableStatusCodes", "[]"), rpath + "retryableStatusCodes is empty, must name at least one code"},
		{"codes not an array", rp("retryableStatusCodes", `"BUSY"`), rpath + `retryableStatusCodes is "BUSY", must be a JSON array`},
		{"gRPC code name", rp("retryableStatusCodes", `["BUSY","UNAVAILABLE"]`), rpath + `retryableStatusCodes[1] is "UNAVAILABLE"` + codeRule},
		{"OK is not a code", rp("retryableStatusCodes", `["OK"]`), rpath + `retryableStatusCodes[0] is "OK"` + codeRule},
		{"lower-case code", rp("retryableStatusCodes", `["busy"]`), rpath + `retryableStatusCodes[0] is "busy"` + codeRule},
		{"numeric code", rp("retryableStatusCodes", `[3]`), rpath + `retryableStatusCodes[0] is 3, must be a string`},
		{"unknown retry field", rp("jitter", `"equal"`),
			`serviceconfig: methodConfig[0].retryPolicy has unknown field "jitter" (known: maxAttempts, initialBackoff, maxBackoff, backoffMultiplier, retryableStatusCodes)`},

		// Hedging policies.
		{"hedge maxAttempts 1", hp(`"maxAttempts":1,"nonFatalStatusCodes":["BUSY"]`), hpath + "maxAttempts is 1, must be >= 2"},
		{"hedge maxAttempts missing", hp(`"nonFatalStatusCodes":["BUSY"]`), hpath + "maxAttempts is missing, it is required"},
		{"hedge codes missing", hp(`"maxAttempts":2`), hpath + "nonFatalStatusCodes is missing, it is required"},
		{"hedge codes empty", hp(`"maxAttempts":2,"nonFatalStatusCodes":[]`), hpath + "nonFatalStatusCodes is empty, must name at least one code"},
		{"hedge negative delay", hp(`"maxAttempts":2,"hedgingDelay":"-0.5s","nonFatalStatusCodes":["BUSY"]`), hpath + `hedgingDelay is "-0.5s", must be >= 0`},
		{"hedge delay without s", hp(`"maxAttempts":2,"hedgingDelay":"5","nonFatalStatusCodes":["BUSY"]`), hpath + `hedgingDelay is "5", must be a duration string such as "0.1s"`},
		{"hedge unknown code", hp(`"maxAttempts":2,"nonFatalStatusCodes":["INTERNAL"]`), hpath + `nonFatalStatusCodes[0] is "INTERNAL"` + codeRule},

		// Retry throttling.
		{"throttling missing maxTokens", `{"retryThrottling":{"tokenRatio":0.1}}`, "serviceconfig: retryThrottling.maxTokens is missing, it is required"},
		{"throttling missing tokenRatio", `{"retryThrottling":{"maxTokens":10}}`, "serviceconfig: retryThrottling.tokenRatio is missing, it is required"},
		{"maxTokens zero", `{"retryThrottling":{"maxTokens":0,"tokenRatio":0.1}}`, "serviceconfig: retryThrottling.maxTokens is 0, must be in (0, 1000]"},
		{"maxTokens above 1000", `{"retryThrottling":{"maxTokens":1000.5,"tokenRatio":0.1}}`, "serviceconfig: retryThrottling.maxTokens is 1000.5, must be in (0, 1000]"},
		{"maxTokens four decimals", `{"retryThrottling":{"maxTokens":10.0001,"tokenRatio":0.1}}`, "serviceconfig: retryThrottling.maxTokens is 10.0001, must have at most 3 decimal places"},
		{"tokenRatio zero", `{"retryThrottling":{"maxTokens":10,"tokenRatio":0}}`, "serviceconfig: retryThrottling.tokenRatio is 0, must be a finite number > 0"},
		{"tokenRatio negative", `{"retryThrottling":{"maxTokens":10,"tokenRatio":-0.1}}`, "serviceconfig: retryThrottling.tokenRatio is -0.1, must be a finite number > 0"},
		{"tokenRatio four decimals", `{"retryThrottling":{"maxTokens":10,"tokenRatio":0.1234}}`, "serviceconfig: retryThrottling.tokenRatio is 0.1234, must have at most 3 decimal places"},
		{"tokenRatio exponent decimals", `{"retryThrottling":{"maxTokens":10,"tokenRatio":5e-4}}`, "serviceconfig: retryThrottling.tokenRatio is 5e-4, must have at most 3 decimal places"},
		{"tokenRatio a string", `{"retryThrottling":{"maxTokens":10,"tokenRatio":"0.1"}}`, `serviceconfig: retryThrottling.tokenRatio is "0.1", must be a number`},
		{"unknown throttling field", `{"retryThrottling":{"maxTokens":10,"tokenRatio":0.1,"burst":1}}`,
			`serviceconfig: retryThrottling has unknown field "burst" (known: maxTokens, tokenRatio)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.json))
			if err == nil {
				t.Fatalf("Parse accepted %s: %+v", tt.json, c)
			}
			if err.Error() != tt.want {
				t.Fatalf("Parse error\n got: %s\nwant: %s", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *Error", err)
			}
		})
	}
}

func TestParseErrorUnwrapsJSON(t *testing.T) {
	_, err := Parse([]byte(`{"methodConfig": [}`))
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		t.Fatalf("error %v does not unwrap to a *json.SyntaxError", err)
	}
}

func TestNewValidates(t *testing.T) {
	good := retry.Policy{MaxAttempts: 2, InitialBackoff: time.Second, MaxBackoff: time.Second, BackoffMultiplier: 1, RetryableCodes: codes.NewSet(codes.Busy)}
	bad := good
	bad.RetryableCodes = 0
	badHedge := hedge.Policy{MaxAttempts: 3, HedgingDelay: -1, NonFatalCodes: codes.NewSet(codes.Busy)}
	tests := []struct {
		name       string
		methods    []MethodConfig
		throttling *retry.ThrottleConfig
		want       string
	}{
		{"valid", []MethodConfig{{Names: []Name{{"s", ""}}, Retry: &good}}, &retry.ThrottleConfig{MaxTokens: 1, TokenRatio: 1}, ""},
		{"retry field renamed", []MethodConfig{{Names: []Name{{"s", ""}}, Retry: &bad}}, nil,
			"serviceconfig: methodConfig[0].retryPolicy.retryableStatusCodes is empty, must name at least one code"},
		{"hedge field", []MethodConfig{{Names: []Name{{"s", ""}}}, {Names: []Name{{"t", ""}}, Hedge: &badHedge}}, nil,
			"serviceconfig: methodConfig[1].hedgingPolicy.hedgingDelay is -1ns, must be >= 0"},
		{"negative timeout", []MethodConfig{{Names: []Name{{"s", ""}}, Timeout: -time.Second}}, nil,
			"serviceconfig: methodConfig[0].timeout is -1s, must be >= 0"},
		{"throttling", nil, &retry.ThrottleConfig{MaxTokens: 2000, TokenRatio: 1},
			"serviceconfig: retryThrottling.maxTokens is 2000, must be in (0, 1000]"},
	}
	for _, tt := range tests {
		_, err := New(tt.methods, tt.throttling)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: New error\n got: %s\nwant: %s", tt.name, got, tt.want)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	c, err := Parse([]byte(full))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Lookup("kv", "Put"); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data := []byte(full)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAdaptiveHedging(t *testing.T) {
	cfg, err := Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],"hedgingPolicy":{"maxAttempts":2,"hedgingDelay":"0.01s",
		"nonFatalStatusCodes":["BUSY"],"adaptiveDelay":{"quantile":0.95,"window":1000,"floor":"0.001s","cap":"0.5s","budget":0.1}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	mc, _ := cfg.Lookup("kv", "get")
	a := mc.Hedge.Adaptive
	if a == nil || a.Quantile != 0.95 || a.Window != 1000 || a.Floor != time.Millisecond || a.Cap != 500*time.Millisecond || a.Budget != 0.1 {
		t.Fatalf("adaptive = %+v", a)
	}
	for _, tc := range []struct{ js, want string }{
		{`{"quantile":1,"window":100,"floor":"0.001s","cap":"1s"}`, "methodConfig[0].hedgingPolicy.adaptiveDelay.quantile is 1, must be in (0, 1)"},
		{`{"quantile":0.9,"window":5,"floor":"0.001s","cap":"1s"}`, "adaptiveDelay.window"},
		{`{"quantile":0.9,"window":100,"floor":"1s","cap":"0.1s"}`, "adaptiveDelay.cap"},
		{`{"quantile":0.9,"window":100,"floor":"0.001s"}`, "adaptiveDelay"},
		{`{"quantile":0.9,"window":100,"floor":"0.001s","cap":"1s","speed":1}`, "speed"},
	} {
		_, err := Parse([]byte(`{"methodConfig":[{"name":[{"service":"kv"}],"hedgingPolicy":{"maxAttempts":2,
			"nonFatalStatusCodes":["BUSY"],"adaptiveDelay":` + tc.js + `}}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.js, err, tc.want)
		}
	}
}
