package serviceconfig

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/criticality"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
)

// Name selects the calls a MethodConfig applies to. An empty Method selects
// every method of Service; an empty Service (with an empty Method) selects
// every call.
type Name struct {
	Service string
	Method  string
}

// MethodConfig is the configuration of the calls its Names select.
type MethodConfig struct {
	// Names are the (service, method) pairs this config applies to. There
	// is at least one.
	Names []Name
	// Retry is the retry policy, or nil. At most one of Retry and Hedge is
	// set; with neither, calls are neither retried nor hedged.
	Retry *retry.Policy
	// Hedge is the hedging policy, or nil.
	Hedge *hedge.Policy
	// Timeout is the deadline of the whole call, all attempts included;
	// 0 means none.
	Timeout time.Duration
	// WaitForReady makes calls wait, until their deadline, for a peer to
	// become ready when every peer is in transient failure, instead of
	// failing at once with UNAVAILABLE (gRPC's waitForReady).
	WaitForReady bool
	// Criticality is the class of the calls (the method's "criticality":
	// "critical_plus", "critical", "sheddable_plus" or "sheddable"), or 0
	// when the config sets none (see package criticality for where a
	// call's class comes from then).
	Criticality criticality.Class
}

// Config is a parsed, validated service config. Make it with Parse or New;
// it is read-only afterwards and safe for concurrent use.
type Config struct {
	// Methods are the method configs in the order given.
	Methods []MethodConfig
	// RetryThrottling is the service's retry-throttling bucket
	// configuration (a Channel makes one bucket from it for each Client),
	// or nil when the config has none.
	RetryThrottling *retry.ThrottleConfig
	// Balancing is the "balancing" section: how each service's calls are
	// shared among its peers (see Balancing and BalancingFor).
	Balancing []Balancing

	index map[Name]int
}

// Error is a configuration error: the path of the offending field (as
// "methodConfig[0].retryPolicy.maxAttempts"), the value found, and the rule
// it breaks. Its message reads "serviceconfig: <path> is <value>, <rule>".
type Error struct {
	// Path is the field's path; empty for the document itself (the
	// message then says "config").
	Path string
	// Value is the offending value as the config spells it, or a word such
	// as "missing"; empty when the rule says it all.
	Value string
	// Rule is what is required ("must be >= 2").
	Rule string
	// Err is the underlying error (a JSON syntax error), if any.
	Err error
}

// Error formats the error as described on the type.
func (e *Error) Error() string {
	s := "serviceconfig: config "
	if e.Path != "" {
		s = "serviceconfig: " + e.Path + " "
	}
	if e.Value != "" {
		s += "is " + e.Value + ", "
	}
	s += e.Rule
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// New validates methods and throttling and returns the Config holding
// them, indexed for Lookup. It applies the same rules as Parse to the
// values (not the JSON syntax): each method config has at least one name,
// no name appears twice, a name with a method has a service, at most one
// policy is set and it validates, the timeout is >= 0, and the throttling
// configuration validates.
func New(methods []MethodConfig, throttling *retry.ThrottleConfig) (*Config, error) {
	c := &Config{Methods: methods, RetryThrottling: throttling, index: make(map[Name]int)}
	where := make(map[Name]string)
	for i, m := range methods {
		path := "methodConfig[" + strconv.Itoa(i) + "]"
		if len(m.Names) == 0 {
			return nil, &Error{Path: path + ".name", Value: "empty", Rule: "must name at least one service"}
		}
		for j, n := range m.Names {
			np := path + ".name[" + strconv.Itoa(j) + "]"
			if n.Service == "" && n.Method != "" {
				return nil, &Error{Path: np + ".method", Value: strconv.Quote(n.Method), Rule: "must be empty when service is empty"}
			}
			if prev, dup := where[n]; dup {
				return nil, &Error{Path: np, Value: nameJSON(n), Rule: "duplicates " + prev}
			}
			where[n] = np
			c.index[n] = i
		}
		if m.Retry != nil && m.Hedge != nil {
			return nil, &Error{Path: path, Rule: "has both retryPolicy and hedgingPolicy, at most one may be set"}
		}
		if m.Retry != nil {
			if err := m.Retry.Validate(); err != nil {
				return nil, fieldError(path+".retryPolicy", err)
			}
		}
		if m.Hedge != nil {
			if err := m.Hedge.Validate(); err != nil {
				return nil, fieldError(path+".hedgingPolicy", err)
			}
		}
		if m.Timeout < 0 {
			return nil, &Error{Path: path + ".timeout", Value: m.Timeout.String(), Rule: "must be >= 0"}
		}
	}
	if throttling != nil {
		if err := throttling.Validate(); err != nil {
			return nil, fieldError("retryThrottling", err)
		}
	}
	return c, nil
}

// fieldError re-presents a policy's FieldError under path, with the field
// spelled as the service config spells it.
func fieldError(path string, err error) error {
	var rf *retry.FieldError
	if errors.As(err, &rf) {
		return &Error{Path: path + "." + jsonField(rf.Field), Value: rf.Value, Rule: rf.Rule}
	}
	return &Error{Path: path, Rule: "is invalid", Err: err}
}

// jsonField spells a FieldError's Go field path ("Policy.Adaptive.Quantile")
// as the service config does ("adaptiveDelay.quantile"): the type's name
// dropped, each name lower-cased, and the few names that differ renamed.
func jsonField(f string) string {
	_, f, _ = strings.Cut(f, ".")
	parts := strings.Split(f, ".")
	for i, p := range parts {
		switch p {
		case "RetryableCodes":
			p = "retryableStatusCodes"
		case "NonFatalCodes":
			p = "nonFatalStatusCodes"
		case "Adaptive":
			p = "adaptiveDelay"
		default:
			p = strings.ToLower(p[:1]) + p[1:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

func nameJSON(n Name) string {
	b, _ := json.Marshal(struct {
		Service string `json:"service"`
		Method  string `json:"method"`
	}{n.Service, n.Method})
	return string(b)
}

// Lookup returns the method config for a call to method of service: the
// one naming (service, method) exactly, else the one naming the whole
// service, else the one naming every call. It reports false when none
// applies. The returned config is shared: do not modify it. Lookup does
// not allocate.
func (c *Config) Lookup(service, method string) (*MethodConfig, bool) {
	if c == nil {
		return nil, false
	}
	for _, n := range [...]Name{{service, method}, {service, ""}, {"", ""}} {
		if i, ok := c.index[n]; ok {
			return &c.Methods[i], true
		}
	}
	return nil, false
}
