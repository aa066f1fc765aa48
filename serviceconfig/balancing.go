package serviceconfig

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/sluice-rpc/sluice/balance"
)

// Balancing is one entry of the "balancing" section: how the calls of the
// services it names are shared among their peers.
//
//	"balancing": [{
//	  "services": ["kv"],
//	  "slowStart": {"window": "10s", "aggression": 1, "minWeight": 0.1},
//	  "outlierEjection": {"consecutiveErrors": 5, "baseEjectionTime": "30s",
//	    "maxEjectionTime": "300s", "maxEjectionPercent": 10, "panicThreshold": 50},
//	  "shardBalanceFactor": 1.25
//	}]
//
// Every field may be left out for its default (balance.Config's);
// "disabled": true turns slow start or ejection off. An entry without
// "services" applies to every service no other entry names.
type Balancing struct {
	// Services are the TChannel services the entry applies to; empty
	// means every service without an entry of its own.
	Services []string
	// Config is the balancing.
	Config balance.Config
}

// BalancingFor returns the balancing of service's calls: its own entry's,
// else the entry without services, else the zero balance.Config (every
// default).
func (c *Config) BalancingFor(service string) balance.Config {
	if c == nil {
		return balance.Config{}
	}
	var def balance.Config
	for _, b := range c.Balancing {
		if len(b.Services) == 0 {
			def = b.Config
		}
		for _, s := range b.Services {
			if s == service {
				return b.Config
			}
		}
	}
	return def
}

func parseBalancingSection(raw json.RawMessage) ([]Balancing, error) {
	items, err := array("balancing", raw)
	if err != nil {
		return nil, err
	}
	var (
		out      []Balancing
		where    = make(map[string]string)
		catchAll = ""
	)
	for i, item := range items {
		path := "balancing[" + strconv.Itoa(i) + "]"
		b, err := parseBalancing(path, item)
		if err != nil {
			return nil, err
		}
		if len(b.Services) == 0 {
			if catchAll != "" {
				return nil, &Error{Path: path, Rule: "has no services, as " + catchAll + " has: at most one entry may apply to every service"}
			}
			catchAll = path
		}
		for j, s := range b.Services {
			sp := path + ".services[" + strconv.Itoa(j) + "]"
			if s == "" {
				return nil, &Error{Path: sp, Value: `""`, Rule: "must be a service name (leave \"services\" out for every service)"}
			}
			if prev, dup := where[s]; dup {
				return nil, &Error{Path: sp, Value: strconv.Quote(s), Rule: "duplicates " + prev}
			}
			where[s] = sp
		}
		out = append(out, b)
	}
	return out, nil
}

func parseBalancing(path string, raw json.RawMessage) (Balancing, error) {
	var b Balancing
	obj, err := object(path, raw)
	if err != nil {
		return b, err
	}
	if err := known(path, obj, "services", "slowStart", "outlierEjection", "shardBalanceFactor"); err != nil {
		return b, err
	}
	if raw, ok := obj["services"]; ok {
		items, err := array(path+".services", raw)
		if err != nil {
			return b, err
		}
		for j, it := range items {
			s, err := optString(path+".services["+strconv.Itoa(j)+"]", it)
			if err != nil {
				return b, err
			}
			b.Services = append(b.Services, s)
		}
	}
	if raw, ok := obj["slowStart"]; ok {
		if b.Config.SlowStart, err = parseSlowStart(path+".slowStart", raw); err != nil {
			return b, err
		}
	}
	if raw, ok := obj["outlierEjection"]; ok {
		if b.Config.Ejection, err = parseEjection(path+".outlierEjection", raw); err != nil {
			return b, err
		}
	}
	if raw, ok := obj["shardBalanceFactor"]; ok {
		p := path + ".shardBalanceFactor"
		text, f, err := number(p, raw)
		if err != nil {
			return b, err
		}
		if !(f > 1) || math.IsInf(f, 0) {
			return b, &Error{Path: p, Value: text, Rule: "must be a finite number > 1"}
		}
		b.Config.BalanceFactor = f
	}
	return b, nil
}

func parseSlowStart(path string, raw json.RawMessage) (balance.SlowStart, error) {
	var s balance.SlowStart
	obj, err := object(path, raw)
	if err != nil {
		return s, err
	}
	if err := known(path, obj, "window", "aggression", "minWeight", "disabled"); err != nil {
		return s, err
	}
	if raw, ok := obj["window"]; ok {
		if s.Window, err = duration(path+".window", raw, true); err != nil {
			return s, err
		}
	}
	if raw, ok := obj["aggression"]; ok {
		if s.Aggression, err = positive(path+".aggression", raw, math.Inf(1)); err != nil {
			return s, err
		}
	}
	if raw, ok := obj["minWeight"]; ok {
		if s.MinWeight, err = positive(path+".minWeight", raw, 1); err != nil {
			return s, err
		}
	}
	if s.Disabled, err = optBool(path+".disabled", obj["disabled"]); err != nil {
		return s, err
	}
	return s, nil
}

func parseEjection(path string, raw json.RawMessage) (balance.Ejection, error) {
	var e balance.Ejection
	obj, err := object(path, raw)
	if err != nil {
		return e, err
	}
	if err := known(path, obj, "consecutiveErrors", "baseEjectionTime", "maxEjectionTime", "maxEjectionPercent", "panicThreshold", "disabled"); err != nil {
		return e, err
	}
	if raw, ok := obj["consecutiveErrors"]; ok {
		p := path + ".consecutiveErrors"
		text, f, err := number(p, raw)
		if err != nil {
			return e, err
		}
		if f != math.Trunc(f) || f < 1 || f > balance.MaxConsecutiveErrors {
			return e, &Error{Path: p, Value: text, Rule: "must be a whole number in [1, " + strconv.Itoa(balance.MaxConsecutiveErrors) + "]"}
		}
		e.ConsecutiveErrors = int(f)
	}
	if raw, ok := obj["baseEjectionTime"]; ok {
		if e.BaseTime, err = duration(path+".baseEjectionTime", raw, true); err != nil {
			return e, err
		}
	}
	if raw, ok := obj["maxEjectionTime"]; ok {
		if e.MaxTime, err = duration(path+".maxEjectionTime", raw, true); err != nil {
			return e, err
		}
	}
	if raw, ok := obj["maxEjectionPercent"]; ok {
		if e.MaxPercent, err = positive(path+".maxEjectionPercent", raw, 100); err != nil {
			return e, err
		}
	}
	if raw, ok := obj["panicThreshold"]; ok {
		if e.PanicThreshold, err = positive(path+".panicThreshold", raw, 100); err != nil {
			return e, err
		}
	}
	if e.Disabled, err = optBool(path+".disabled", obj["disabled"]); err != nil {
		return e, err
	}
	if err := (balance.Config{Ejection: e}).Validate(); err != nil { // MaxTime >= BaseTime
		return e, &Error{Path: path + ".maxEjectionTime", Value: strconv.Quote(e.MaxTime.String()), Rule: "must be >= baseEjectionTime"}
	}
	return e, nil
}

// positive reads a number in (0, most].
func positive(path string, raw json.RawMessage, most float64) (float64, error) {
	text, f, err := number(path, raw)
	if err != nil {
		return 0, err
	}
	if !(f > 0 && f <= most) || math.IsInf(f, 0) {
		rule := "must be a finite number > 0"
		if !math.IsInf(most, 1) {
			rule = "must be in (0, " + strconv.FormatFloat(most, 'g', -1, 64) + "]"
		}
		return 0, &Error{Path: path, Value: text, Rule: rule}
	}
	return f, nil
}

// optBool reads an optional boolean (false when raw is nil).
func optBool(path string, raw json.RawMessage) (bool, error) {
	if raw == nil {
		return false, nil
	}
	var v bool
	if k := kind(raw); (k != 't' && k != 'f') || json.Unmarshal(raw, &v) != nil {
		return false, &Error{Path: path, Value: abbrev(raw), Rule: "must be true or false"}
	}
	return v, nil
}
