package serviceconfig

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rpc/sluice/criticality"

	"github.com/sluice-rpc/sluice/codes"
	"github.com/sluice-rpc/sluice/hedge"
	"github.com/sluice-rpc/sluice/retry"
)

// Parse reads and validates a JSON service config (see the package
// documentation). Any error is an *Error naming the field path and the
// rule; Parse never adjusts an invalid value.
func Parse(data []byte) (*Config, error) {
	top, err := object("", data)
	if err != nil {
		return nil, err
	}
	if err := known("", top, "methodConfig", "retryThrottling", "busyThrottling", "lease", "balancing"); err != nil {
		return nil, err
	}
	var methods []MethodConfig
	if raw, ok := top["methodConfig"]; ok {
		items, err := array("methodConfig", raw)
		if err != nil {
			return nil, err
		}
		for i, item := range items {
			m, err := parseMethod("methodConfig["+strconv.Itoa(i)+"]", item)
			if err != nil {
				return nil, err
			}
			methods = append(methods, m)
		}
	}
	var throttling *retry.ThrottleConfig
	if raw, ok := top["retryThrottling"]; ok {
		t, err := parseThrottling("retryThrottling", raw)
		if err != nil {
			return nil, err
		}
		throttling = &t
	}
	c, err := New(methods, throttling)
	if err != nil {
		return nil, err
	}
	if raw, ok := top["balancing"]; ok {
		if c.Balancing, err = parseBalancingSection(raw); err != nil {
			return nil, err
		}
	}
	// Sections of gRPC's shape that no Channel reads: refused, so that a
	// config never looks applied when it is not.
	if _, ok := top["busyThrottling"]; ok {
		return nil, &Error{Path: "busyThrottling", Rule: "is not read from a service config; set busy throttling with channel.WithBusyConfig (busy.Config)"}
	}
	if _, ok := top["lease"]; ok {
		return nil, &Error{Path: "lease", Rule: "is not read from a service config; lease a service's rate with channel.WithLease and a leasing.Client resource"}
	}
	return c, nil
}

func parseMethod(path string, raw json.RawMessage) (MethodConfig, error) {
	var m MethodConfig
	obj, err := object(path, raw)
	if err != nil {
		return m, err
	}
	if err := known(path, obj, "name", "retryPolicy", "hedgingPolicy", "timeout", "waitForReady", "criticality"); err != nil {
		return m, err
	}
	nraw, ok := obj["name"]
	if !ok {
		return m, &Error{Path: path + ".name", Value: "missing", Rule: "must name at least one service"}
	}
	names, err := array(path+".name", nraw)
	if err != nil {
		return m, err
	}
	for j, n := range names {
		np := path + ".name[" + strconv.Itoa(j) + "]"
		nobj, err := object(np, n)
		if err != nil {
			return m, err
		}
		if err := known(np, nobj, "service", "method"); err != nil {
			return m, err
		}
		var name Name
		if name.Service, err = optString(np+".service", nobj["service"]); err != nil {
			return m, err
		}
		if name.Method, err = optString(np+".method", nobj["method"]); err != nil {
			return m, err
		}
		m.Names = append(m.Names, name)
	}
	_, hasRetry := obj["retryPolicy"]
	_, hasHedge := obj["hedgingPolicy"]
	if hasRetry && hasHedge {
		return m, &Error{Path: path, Rule: "has both retryPolicy and hedgingPolicy, at most one may be set"}
	}
	if hasRetry {
		p, err := parseRetry(path+".retryPolicy", obj["retryPolicy"])
		if err != nil {
			return m, err
		}
		m.Retry = &p
	}
	if hasHedge {
		p, err := parseHedge(path+".hedgingPolicy", obj["hedgingPolicy"])
		if err != nil {
			return m, err
		}
		m.Hedge = &p
	}
	if raw, ok := obj["timeout"]; ok {
		if m.Timeout, err = duration(path+".timeout", raw, true); err != nil {
			return m, err
		}
	}
	if raw, ok := obj["waitForReady"]; ok {
		if err := json.Unmarshal(raw, &m.WaitForReady); err != nil || (kind(raw) != 't' && kind(raw) != 'f') {
			return m, &Error{Path: path + ".waitForReady", Value: abbrev(raw), Rule: "must be true or false"}
		}
	}
	if raw, ok := obj["criticality"]; ok {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return m, &Error{Path: path + ".criticality", Value: abbrev(raw), Rule: "must be a class name: critical_plus, critical, sheddable_plus or sheddable"}
		}
		if m.Criticality, err = criticality.Parse(name); err != nil {
			return m, &Error{Path: path + ".criticality", Value: abbrev(raw), Rule: "must be a class name: critical_plus, critical, sheddable_plus or sheddable"}
		}
	}
	return m, nil
}

func parseRetry(path string, raw json.RawMessage) (retry.Policy, error) {
	var p retry.Policy
	obj, err := object(path, raw)
	if err != nil {
		return p, err
	}
	if err := known(path, obj, "maxAttempts", "initialBackoff", "maxBackoff", "backoffMultiplier", "retryableStatusCodes"); err != nil {
		return p, err
	}
	if err := required(path, obj, "maxAttempts", "initialBackoff", "maxBackoff", "backoffMultiplier", "retryableStatusCodes"); err != nil {
		return p, err
	}
	if p.MaxAttempts, err = maxAttempts(path+".maxAttempts", obj["maxAttempts"]); err != nil {
		return p, err
	}
	if p.InitialBackoff, err = duration(path+".initialBackoff", obj["initialBackoff"], true); err != nil {
		return p, err
	}
	if p.MaxBackoff, err = duration(path+".maxBackoff", obj["maxBackoff"], true); err != nil {
		return p, err
	}
	mp := path + ".backoffMultiplier"
	text, f, err := number(mp, obj["backoffMultiplier"])
	if err != nil {
		return p, err
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return p, &Error{Path: mp, Value: text, Rule: "must be a finite number > 0"}
	}
	p.BackoffMultiplier = f
	if p.RetryableCodes, err = codeSet(path+".retryableStatusCodes", obj["retryableStatusCodes"]); err != nil {
		return p, err
	}
	return p, nil
}

func parseHedge(path string, raw json.RawMessage) (hedge.Policy, error) {
	var p hedge.Policy
	obj, err := object(path, raw)
	if err != nil {
		return p, err
	}
	if err := known(path, obj, "maxAttempts", "hedgingDelay", "nonFatalStatusCodes", "adaptiveDelay"); err != nil {
		return p, err
	}
	if err := required(path, obj, "maxAttempts", "nonFatalStatusCodes"); err != nil {
		return p, err
	}
	if p.MaxAttempts, err = maxAttempts(path+".maxAttempts", obj["maxAttempts"]); err != nil {
		return p, err
	}
	if d, ok := obj["hedgingDelay"]; ok {
		if p.HedgingDelay, err = duration(path+".hedgingDelay", d, false); err != nil {
			return p, err
		}
	}
	if p.NonFatalCodes, err = codeSet(path+".nonFatalStatusCodes", obj["nonFatalStatusCodes"]); err != nil {
		return p, err
	}
	if raw, ok := obj["adaptiveDelay"]; ok {
		a, err := parseAdaptive(path+".adaptiveDelay", raw)
		if err != nil {
			return p, err
		}
		p.Adaptive = &a
	}
	return p, nil
}

// parseAdaptive reads Sluice's extension of hedgingPolicy:
// {"quantile":0.95,"window":1000,"floor":"0.001s","cap":"1s","budget":0.1}.
func parseAdaptive(path string, raw json.RawMessage) (hedge.Adaptive, error) {
	var a hedge.Adaptive
	obj, err := object(path, raw)
	if err != nil {
		return a, err
	}
	if err := known(path, obj, "quantile", "window", "floor", "cap", "budget"); err != nil {
		return a, err
	}
	if err := required(path, obj, "quantile", "window", "floor", "cap"); err != nil {
		return a, err
	}
	if _, a.Quantile, err = number(path+".quantile", obj["quantile"]); err != nil {
		return a, err
	}
	text, w, err := number(path+".window", obj["window"])
	if err != nil {
		return a, err
	}
	if w != math.Trunc(w) || math.Abs(w) > hedge.MaxWindow+1 { // the range is a.Validate's
		return a, &Error{Path: path + ".window", Value: text, Rule: "must be a whole number in [10, " + strconv.Itoa(hedge.MaxWindow) + "]"}
	}
	a.Window = int(w)
	if a.Floor, err = duration(path+".floor", obj["floor"], true); err != nil {
		return a, err
	}
	if a.Cap, err = duration(path+".cap", obj["cap"], true); err != nil {
		return a, err
	}
	if b, ok := obj["budget"]; ok {
		if _, a.Budget, err = number(path+".budget", b); err != nil {
			return a, err
		}
	}
	if err := a.Validate(); err != nil {
		return a, fieldError(path, err)
	}
	return a, nil
}

func parseThrottling(path string, raw json.RawMessage) (retry.ThrottleConfig, error) {
	var t retry.ThrottleConfig
	obj, err := object(path, raw)
	if err != nil {
		return t, err
	}
	if err := known(path, obj, "maxTokens", "tokenRatio"); err != nil {
		return t, err
	}
	if err := required(path, obj, "maxTokens", "tokenRatio"); err != nil {
		return t, err
	}
	mp := path + ".maxTokens"
	text, f, err := number(mp, obj["maxTokens"])
	if err != nil {
		return t, err
	}
	if !(f > 0 && f <= 1000) {
		return t, &Error{Path: mp, Value: text, Rule: "must be in (0, 1000]"}
	}
	if decimals(text) > 3 {
		return t, &Error{Path: mp, Value: text, Rule: "must have at most 3 decimal places"}
	}
	t.MaxTokens = f
	rp := path + ".tokenRatio"
	if text, f, err = number(rp, obj["tokenRatio"]); err != nil {
		return t, err
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return t, &Error{Path: rp, Value: text, Rule: "must be a finite number > 0"}
	}
	if decimals(text) > 3 {
		return t, &Error{Path: rp, Value: text, Rule: "must have at most 3 decimal places"}
	}
	t.TokenRatio = f
	return t, nil
}

// object decodes raw as a JSON object, rejecting a field given twice and
// anything after the object.
func object(path string, raw []byte) (map[string]json.RawMessage, error) {
	if k := kind(raw); k != '{' {
		if k == 'n' && string(bytes.TrimSpace(raw)) == "null" {
			return nil, &Error{Path: path, Value: "null", Rule: "must be a JSON object"}
		}
		if k == 0 {
			return nil, &Error{Path: path, Value: "empty", Rule: "must be a JSON object"}
		}
		return nil, &Error{Path: path, Value: abbrev(raw), Rule: "must be a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, invalidJSON(path, err)
	}
	m := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidJSON(path, err)
		}
		key, _ := tok.(string) // the decoder only yields strings as keys
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalidJSON(path, err)
		}
		if _, dup := m[key]; dup {
			return nil, &Error{Path: path, Rule: "has field " + strconv.Quote(key) + " twice"}
		}
		m[key] = v
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, invalidJSON(path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Path: path, Rule: "has data after the JSON object"}
	}
	return m, nil
}

func invalidJSON(path string, err error) error {
	if err == io.EOF { // the decoder's word for a truncated document
		err = io.ErrUnexpectedEOF
	}
	return &Error{Path: path, Rule: "is not valid JSON", Err: err}
}

// array decodes raw as a JSON array.
func array(path string, raw []byte) ([]json.RawMessage, error) {
	if k := kind(raw); k != '[' {
		return nil, &Error{Path: path, Value: abbrev(raw), Rule: "must be a JSON array"}
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, invalidJSON(path, err)
	}
	return a, nil
}

// kind returns the first significant byte of a JSON value: '{', '[', '"',
// 'n' (null), 't'/'f', a digit or '-'; 0 for an empty value.
func kind(raw []byte) byte {
	s := bytes.TrimLeft(raw, " \t\r\n")
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

// abbrev returns a JSON value's text for an error message, shortened.
func abbrev(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// known rejects fields outside allowed.
func known(path string, obj map[string]json.RawMessage, allowed ...string) error {
	var unknown []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return &Error{Path: path, Rule: "has unknown field " + strconv.Quote(unknown[0]) + " (known: " + strings.Join(allowed, ", ") + ")"}
}

// required rejects a missing field of fields.
func required(path string, obj map[string]json.RawMessage, fields ...string) error {
	for _, f := range fields {
		if _, ok := obj[f]; !ok {
			return &Error{Path: path + "." + f, Value: "missing", Rule: "it is required"}
		}
	}
	return nil
}

func optString(path string, raw json.RawMessage) (string, error) {
	if raw == nil {
		return "", nil
	}
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &Error{Path: path, Value: abbrev(raw), Rule: "must be a string"}
	}
	return s, nil
}

// number reads a JSON number, returning its text and value.
func number(path string, raw json.RawMessage) (string, float64, error) {
	var n json.Number
	if k := kind(raw); !(k == '-' || k >= '0' && k <= '9') || json.Unmarshal(raw, &n) != nil {
		return "", 0, &Error{Path: path, Value: abbrev(raw), Rule: "must be a number"}
	}
	text := n.String()
	f, err := strconv.ParseFloat(text, 64)
	if err != nil { // out of range
		f = math.Inf(1)
		if text[0] == '-' {
			f = math.Inf(-1)
		}
	}
	return text, f, nil
}

// maxAttempts reads an integer >= 2. Values beyond the int32 range are read
// as the int32 maximum: the client caps them at MaxAttemptsCap anyway.
func maxAttempts(path string, raw json.RawMessage) (int, error) {
	text, _, err := number(path, raw)
	if err != nil {
		return 0, err
	}
	if strings.ContainsAny(text, ".eE") {
		return 0, &Error{Path: path, Value: text, Rule: "must be an integer"}
	}
	n, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		if text[0] == '-' {
			return 0, &Error{Path: path, Value: text, Rule: "must be >= 2"}
		}
		n = math.MaxInt32
	}
	if n < 2 {
		return 0, &Error{Path: path, Value: text, Rule: "must be >= 2"}
	}
	return int(n), nil
}

// decimals returns the number of decimal places of a JSON number's text
// (trailing zeros of the fraction not counted), or a large number when the
// exponent is unreadable.
func decimals(text string) int {
	mant, exp := text, 0
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		mant = text[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(text[i+1:], "+"))
		if err != nil || e < -1e6 || e > 1e6 {
			return math.MaxInt32
		}
		exp = e
	}
	frac := 0
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		frac = len(strings.TrimRight(mant[i+1:], "0"))
	}
	return max(frac-exp, 0)
}

// codeSet reads a non-empty array of TChannel code names.
func codeSet(path string, raw json.RawMessage) (codes.Set, error) {
	items, err := array(path, raw)
	if err != nil {
		return 0, err
	}
	if len(items) == 0 {
		return 0, &Error{Path: path, Value: "empty", Rule: "must name at least one code"}
	}
	var set codes.Set
	for i, item := range items {
		ip := path + "[" + strconv.Itoa(i) + "]"
		s, err := optString(ip, item)
		if err != nil {
			return 0, err
		}
		c, err := codes.Parse(s)
		if err != nil || c.String() != s {
			return 0, &Error{Path: ip, Value: strconv.Quote(s), Rule: "must be one of TIMEOUT, CANCELLED, BUSY, DECLINED, UNEXPECTED, BAD_REQUEST, NETWORK, PROTOCOL"}
		}
		set |= codes.NewSet(c)
	}
	return set, nil
}

// maxSeconds is the largest whole number of seconds a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// duration reads a proto3 JSON duration string: an optional "-", decimal
// seconds with at most nine decimal places, and "s". positive requires
// > 0; otherwise >= 0 is required.
func duration(path string, raw json.RawMessage, positive bool) (time.Duration, error) {
	const form = `must be a duration string such as "0.1s"`
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return 0, &Error{Path: path, Value: abbrev(raw), Rule: form}
	}
	q := strconv.Quote(s)
	d, ok, tooBig := parseDuration(s)
	switch {
	case !ok:
		return 0, &Error{Path: path, Value: q, Rule: form}
	case tooBig:
		return 0, &Error{Path: path, Value: q, Rule: "must be at most " + strconv.FormatInt(maxSeconds, 10) + "s"}
	case positive && d <= 0:
		return 0, &Error{Path: path, Value: q, Rule: "must be > 0"}
	case d < 0:
		return 0, &Error{Path: path, Value: q, Rule: "must be >= 0"}
	}
	return d, nil
}

func parseDuration(s string) (d time.Duration, ok, tooBig bool) {
	body, found := strings.CutSuffix(s, "s")
	if !found {
		return 0, false, false
	}
	neg := strings.HasPrefix(body, "-")
	body = strings.TrimPrefix(body, "-")
	whole, frac, hasFrac := strings.Cut(body, ".")
	if whole == "" || !digits(whole) || hasFrac && (frac == "" || len(frac) > 9 || !digits(frac)) {
		return 0, false, false
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 19 {
		return 0, true, true
	}
	sec, err := strconv.ParseInt("0"+whole, 10, 64)
	if err != nil || sec > maxSeconds {
		return 0, true, true
	}
	var ns int64
	if hasFrac {
		ns, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	total := sec*int64(time.Second) + ns
	if total < 0 { // overflowed in the last partial second
		return 0, true, true
	}
	d = time.Duration(total)
	if neg {
		d = -d
	}
	return d, true, false
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
